#!/usr/sbin/dtrace -s
#pragma D option quiet
#pragma D option switchrate=10hz

dtrace:::BEGIN
{
	printf("%-20s %6s %s\n", "COMMAND", "PID", "PATH");
	start = timestamp;
}

syscall::open*:entry, syscall::openat:entry
/execname != "dtrace"/
{
	self->path = copyinstr(probefunc == "openat" ? arg1 : arg0);
	self->start[probefunc] = timestamp;
}

syscall::open*:return, syscall::openat:return
/self->start[probefunc]/
{
	@lat[probefunc] = avg(timestamp - self->start[probefunc]);
	@dist = quantize((timestamp - self->start[probefunc]) / 1000);
	printf("%-20s %6d %s %d\n", execname, pid, self->path, (int)arg0);
	self->start[probefunc] = 0;
	self->path = "";
}

sched:::on-cpu { self->ts = timestamp; }
sched:::off-cpu /self->ts/ { @oncpu[cpu] = quantize(timestamp - self->ts); self->ts = 0; }

profile:::profile-1001hz /arg1/ { @u[execname, ufunc(arg1)] = count(); }
profile:::profile-1001hz /arg0/ { @k[stack(10)] = count(); }

syscall::write:entry /arg2 > 0/ {
	this->buf = (char *)copyin(arg1, 16);
	printf("%s: %s\n", execname, stringof(this->buf));
	@bytes[execname] = sum(arg2);
}

tick-1s
{
	normalize(@bytes, 1024);
	printa("%-16s %@8d KB\n", @bytes);
	printa(@lat);
	trunc(@u, 10);
	clear(@bytes);
}

dtrace:::END
{
	printf("ran %d ms\n", (timestamp - start) / 1000000);
	printa(@dist);
}
