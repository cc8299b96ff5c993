from specsweep.engines.argv import args_to_argv


def test_flags_are_sorted_and_typed():
    argv = args_to_argv({"tp-size": 8, "enable-mscclpp": True, "disable-x": False, "model-path": "/m", "y": None})
    assert argv == ["--enable-mscclpp", "--model-path", "/m", "--tp-size", "8"]


def test_list_values_follow_one_flag_and_floats_keep_their_form():
    assert args_to_argv({"cuda-graph-bs": [1, 2, 4], "mem-fraction-static": 0.8, "x": 2.0}) == [
        "--cuda-graph-bs", "1", "2", "4", "--mem-fraction-static", "0.8", "--x", "2.0",
    ]


def test_key_order_does_not_change_argv():
    assert args_to_argv({"a": 1, "b": 2}) == args_to_argv({"b": 2, "a": 1})
