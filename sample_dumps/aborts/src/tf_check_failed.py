"""A real TensorFlow CHECK failure in a kernel: TensorFlow prints its fatal line, then abort().

main -> preprocess -> pad_and_convolve runs tf.raw_ops.FusedPadConv2D eagerly (the kernel runs
on the calling thread) with a scalar where a 4-D NHWC image belongs. In eager mode the op's
shape function is not consulted, and the CPU kernel (FusedResizeConv2DUsingGemmOp::Compute)
takes the input's sizes with `input.dim_size(1)` etc. without checking its rank:
TensorShapeBase::dim_size's CHECK_LT fails (tensorflow/core/framework/tensor_shape.cc),
TensorFlow's LogMessageFatal writes its "F" line to stderr and calls the CRT's abort().
(tensorflow/tensorflow#67527 reports the same CHECK on Linux with TF 2.16.1.) Under Wine,
ucrtbase's abort() is _exit(3): no exception, exit code 3; `dumper.exe --on-exit` stops the
process at ntdll!RtlExitUserProcess.

The message itself is deliberately not quoted here: the program's source is in the process's
memory, and the only copies of the message in a dump must be the ones TensorFlow made.
Lines marked "# stack" are the Python frames at the abort (the last one is the op call).
"""

import json
import sys
import threading

import numpy
import tensorflow as tf


def pad_and_convolve(image, kernel):
    facts = {
        "scenario": "tf_check_failed",
        "python": sys.version,
        "executable": sys.executable,
        "tensorflow": tf.__version__,
        "tensorflow_file": tf.__file__,
        "numpy": numpy.__version__,
        "op": "FusedPadConv2D",
        "input_shape": list(image.shape),
        "filter_shape": list(kernel.shape),
        "crash_native_id": threading.get_native_id(),
        "main_native_id": threading.main_thread().native_id,
    }
    print("MARKER " + json.dumps(facts), flush=True)
    return tf.raw_ops.FusedPadConv2D(  # stack
        input=image,
        paddings=tf.constant(1, shape=[4, 2], dtype=tf.int32),
        filter=kernel,
        mode="REFLECT",
        strides=[1, 1, 1, 1],
        padding="VALID",
    )


def preprocess(pixels):
    image = tf.constant(pixels, dtype=tf.float32)  # the bug: a scalar, not [batch, h, w, c]
    kernel = tf.constant([], shape=[1, 1, 0, 1, 0], dtype=tf.float32)
    return pad_and_convolve(image, kernel)  # stack


def main():
    print(preprocess(1.5))  # stack


main()  # stack
