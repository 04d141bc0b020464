# The docs test's stand-in for the reader's own fine-tuning script, started
# by torchrun: each rank says who it is (torchrun sets RANK and WORLD_SIZE).
import os

print(f"rank {os.environ.get('RANK', '0')} of {os.environ.get('WORLD_SIZE', '1')}: step 1 loss=0.5", flush=True)
