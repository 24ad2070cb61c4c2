-- Contract 5: a step records the host's contention during it, seconds: how long the host had more runnable work
-- than CPUs (Linux PSI) and how long its CPUs lost to other guests (a virtual machine's steal time). A slowdown that
-- comes with them is the host's load, not a warm-up. NULL: not measured (older events, a kernel that does not count).
ALTER TABLE steps ADD COLUMN cpu_pressure DOUBLE;
ALTER TABLE steps ADD COLUMN cpu_steal DOUBLE;
