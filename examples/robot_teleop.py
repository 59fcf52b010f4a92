"""Teleoperate an SO-101 follower from an SO-101 leader with the Python API.

    python examples/robot_teleop.py --leader /dev/ttyACM0 --follower /dev/ttyACM1 \
        --leader-calibration leader.json --follower-calibration follower.json

Without ports it runs against two emulated arms (no hardware): the leader is "moved by hand"
to a new pose and the follower follows, at most ``max_step_deg`` per step.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from noeira.robot.emulator import EmulatedBus, register
from noeira.robot.so101 import JOINTS, SO101Follower, SO101Leader


def emulated(tmp: Path) -> tuple[str, str, str]:
    """Two emulated arms and a calibration that fits them."""
    leader, follower = EmulatedBus.so101(), EmulatedBus.so101()
    for i, ticks in zip(JOINTS.values(), [2400, 1700, 2300, 1900, 2048, 2600], strict=True):
        leader[i].set_present(ticks)  # someone moved the leader
    cal = {j: {"id": i, "drive_mode": 0, "homing_offset": 0,
               "range_min": 0 if j == "wrist_roll" else 1024, "range_max": 4095 if j == "wrist_roll" else 3072}
           for j, i in JOINTS.items()}
    path = tmp / "calibration.json"
    path.write_text(json.dumps(cal))
    return register("leader", leader), register("follower", follower), str(path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--leader")
    ap.add_argument("--follower")
    ap.add_argument("--leader-calibration")
    ap.add_argument("--follower-calibration")
    ap.add_argument("--hz", type=float, default=50.0)
    ap.add_argument("--seconds", type=float, default=2.0)
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        if args.leader is None:
            leader_port, follower_port, cal = emulated(Path(tmp))
            leader_cal = follower_cal = cal
        else:
            leader_port, follower_port = args.leader, args.follower
            leader_cal, follower_cal = args.leader_calibration, args.follower_calibration

        with SO101Leader(port=leader_port, calibration=leader_cal) as leader, \
                SO101Follower(port=follower_port, calibration=follower_cal, max_step_deg=5.0) as follower:
            follower.arm()  # holds its present pose; torque is released when the block ends
            end = time.monotonic() + args.seconds
            while time.monotonic() < end:
                sent = follower.send_action(leader.read())
                time.sleep(1.0 / args.hz)
            print("leader  ", {j: round(v, 1) for j, v in leader.read().items()})
            print("follower", {j: round(v, 1) for j, v in follower.read().items()})
            print("last goals", {j: round(v, 1) for j, v in sent.items()})


if __name__ == "__main__":
    main()
