"""A job whose memory grows from ~100 MiB to ~300 MiB, for the tests of live right-sizing on
both backends.

It grows a step at a time; with ``room_wait`` it never steps past its cgroup's memory limit:
it fills up to 93% of the limit (above right-sizing's 90% threshold) and waits, up to
``room_wait`` seconds, for the limit to be raised before it takes the rest of the step. So the
test awaits the resize as an event (the job goes on once it happened) instead of relying on the
job growing slowly enough, and without ``room_wait`` (or once the wait is over) the same job
steps past its limit and is OOM-killed.
"""

GROWING = '''
import os
import time

MIB = 2**20


def _read(path):
    try:
        with open(path) as file:
            text = file.read().strip()
    except OSError:
        return None
    return None if text == "max" else int(text)


def memory():
    """(limit, use) of this process's memory cgroup, v1 or v2, in a pod or a local run."""
    places = []
    with open("/proc/self/cgroup") as file:
        for line in file:
            _, controllers, path = line.rstrip("\\n").split(":", 2)
            if controllers == "":
                places += [("/sys/fs/cgroup" + path, "memory.max", "memory.current")]
            elif "memory" in controllers.split(","):
                places += [("/sys/fs/cgroup/memory" + path, "memory.limit_in_bytes",
                            "memory.usage_in_bytes")]
    places += [("/sys/fs/cgroup/memory", "memory.limit_in_bytes", "memory.usage_in_bytes"),
               ("/sys/fs/cgroup", "memory.max", "memory.current")]
    for base, limit, use in places:
        used = _read(os.path.join(base, use))
        if used is not None:
            return _read(os.path.join(base, limit)), used
    return None, 0


def touched(mib):
    block = bytearray(mib * MIB)
    block[:: 4096] = b"x" * len(block[:: 4096])
    return block


def handler(context, start_mib: int = 100, end_mib: int = 300, step_mib: int = 10,
            pause: float = 0.2, room_wait: float = 0.0):
    held = [touched(start_mib)]
    total = start_mib
    while total < end_mib:
        time.sleep(pause)
        need = step_mib
        deadline = time.monotonic() + room_wait
        while need > 0:
            limit, used = memory()
            if limit is None or limit - used - 4 * MIB >= need * MIB:
                break
            fill = (int(0.93 * limit) - used) // MIB
            if fill > 0:
                taken = min(fill, need)
                held.append(touched(taken))
                need -= taken
            if time.monotonic() >= deadline:
                break
            time.sleep(0.1)
        if need > 0:
            held.append(touched(need))
        total = sum(len(block) for block in held) // MIB
    context.log_result("held_mib", total)
    return total
'''
