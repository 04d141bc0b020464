"""One rank of `go run ./bench hang`: reports a few steps, then blocks.

    RANK=r python3 hang_rank.py DIR

It reports 20 steps of 20 ms with sextant.progress (run and server from
the environment `sextant run` sets), waits until they are sent, writes the
wall time of its last step to DIR/last_<rank>, and then waits for good in
blocked_forever(), the frame the launcher's stacks must name.
"""

import os
import sys
import threading
import time

from sextant.progress import Progress


def blocked_forever() -> None:
    threading.Event().wait()


def main() -> None:
    out = sys.argv[1]
    rank = int(os.environ["RANK"])
    progress = Progress()
    last = time.time()
    for i in range(20):
        time.sleep(0.020)
        progress.step(i, samples=1)
        last = time.time()
    progress.flush()
    with open(os.path.join(out, f"last_{rank}"), "w") as f:
        f.write(f"{last:.6f}\n")
    blocked_forever()


if __name__ == "__main__":
    main()
