"""One stack-trace parser for exporter, validators and runners: the innermost user frame."""

from __future__ import annotations

from portable.frames import Frame, frames_of, innermost_user_frame

TRACE = (
    'File "models/net.py", line 57, in forward\n    x = self.block(x)\n'
    'File "models/blocks.py", line 38, in forward\n    return torch.relu(self.fc(x))\n'
    'File "<eval_with_key>.5", line 9, in forward\n'
    'File "site-packages/torch/nn/modules/module.py", line 1775, in _call_impl\n    return forward_call(*args)\n'
)


def test_frames_and_their_code_lines():
    frames = frames_of(TRACE)
    assert [(f.file, f.line) for f in frames] == [("models/net.py", 57), ("models/blocks.py", 38),
                                                   ("<eval_with_key>.5", 9),
                                                   ("site-packages/torch/nn/modules/module.py", 1775)]
    assert frames[1].code == "return torch.relu(self.fc(x))"
    assert frames[2].code is None  # the next line is the next frame, not code


def test_innermost_user_frame_skips_libraries_and_generated_code():
    assert innermost_user_frame(frames_of(TRACE)) == Frame("models/blocks.py", 38, "forward",
                                                           "return torch.relu(self.fc(x))")
    only_library = frames_of('File "/usr/lib/python3.11/site-packages/torch/x.py", line 3, in f\n    y()\n')
    assert innermost_user_frame(only_library).line == 3
    assert innermost_user_frame([]) is None
