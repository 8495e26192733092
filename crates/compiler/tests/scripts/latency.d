#pragma D option quiet
syscall::read:entry
/execname == "bash"/
{
    self->ts = timestamp;
}
syscall::read:return
/self->ts/
{
    @lat["read", execname] = quantize(timestamp - self->ts);
    @bytes[pid] = sum(arg0 > 0 ? arg0 : 0);
    @sizes = lquantize(arg0, 0, 4096, 256);
    @log = llquantize(arg0, 10, 0, 6, 20);
    @w[probefunc] = quantize(arg0, 2);
    self->ts = 0;
}
tick-10s
{
    printa("%-16s %-16s %@d\n", @lat);
    trunc(@bytes, 10);
    normalize(@sizes, 2);
    denormalize(@sizes);
    clear(@log);
    exit(0);
}
