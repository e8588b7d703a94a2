"""The native backend's thread settings: spinning off unless asked (bench/decode_speed.py --busy
measured why), and a bundle's own session options over the backend's."""

from onnxpipe.backends.native import NativeBackend

SPIN = "session.intra_op.allow_spinning"


def test_pool_threads_do_not_spin_by_default():
    assert NativeBackend().session_options({}).get_session_config_entry(SPIN) == "0"
    assert NativeBackend(spinning=True).session_options({}).get_session_config_entry(SPIN) == "1"


def test_a_bundles_session_options_win():
    options = NativeBackend(threads=1).session_options({SPIN: "1", "intra_op_num_threads": 2})
    assert options.get_session_config_entry(SPIN) == "1"
    assert options.intra_op_num_threads == 2
