fbt::do_sys_open:entry
{
    self->path = copyinstr(arg1);
    self->spec = speculation();
    speculate(self->spec);
    printf("%s", self->path);
}
fbt::do_sys_open:return
/self->spec && (int)arg1 < 0/
{
    commit(self->spec);
    self->spec = 0;
}
fbt::do_sys_open:return
/self->spec/
{
    discard(self->spec);
    self->spec = 0;
}
