// Drawing spread over animation frames. A board that scrolls creates and
// draws charts as they come into view; doing all of them in the frame
// their data arrives in drops frames. inFrame queues the drawing and each
// animation frame runs the most urgent tasks for at most BUDGET_MS (at
// least one), so scrolling keeps its frame rate and the charts on screen
// come first.

interface Task {
  fn: () => void;
  priority: () => number;
  dead: boolean;
}

/** Milliseconds of queued drawing per animation frame. */
export const BUDGET_MS = 8;
const queue: Task[] = [];
let raf = 0;

function run(): void {
  raf = 0;
  const t0 = performance.now();
  let done = 0;
  while (queue.length) {
    let best = -1;
    let bestP = Infinity;
    for (let i = 0; i < queue.length; i++) {
      if (queue[i].dead) {
        queue.splice(i--, 1);
        continue;
      }
      const p = queue[i].priority();
      if (p < bestP) (bestP = p), (best = i);
    }
    if (best < 0) break;
    if (done > 0 && performance.now() - t0 >= BUDGET_MS) break;
    const [t] = queue.splice(best, 1);
    done++;
    try {
      t.fn();
    } catch (e) {
      console.error(e);
    }
  }
  if (queue.length && !raf) raf = requestAnimationFrame(run);
}

/** inFrame runs fn in a coming animation frame, the lowest priority first; the returned function cancels it. */
export function inFrame(fn: () => void, priority: () => number = () => 0): () => void {
  const t: Task = { fn, priority, dead: false };
  queue.push(t);
  if (!raf) raf = requestAnimationFrame(run);
  return () => {
    t.dead = true;
  };
}
