//! The kernel's BTF (5 MB on a distribution kernel, ~35 ms and 16 MiB to parse) is parsed once
//! for an enabling: planning a program (the task offsets its probes' code reads, the probes'
//! shapes) and enabling its syscall probes (their typed arguments) share the parse, which is let
//! go once the probes are attached. (A test binary of its own: the count is the process's.)

mod common;

use common::kernel_ok;
use dtrace_compiler::{compile as compile_d, CompileOptions};
use dtrace_linux::btf::Btf;

#[test]
fn planning_and_enabling_parse_the_kernels_btf_once() {
    let t = "planning_and_enabling_parse_the_kernels_btf_once";
    if !kernel_ok(t)
        || !dtrace_testkit::skip_unless(
            std::path::Path::new("/sys/kernel/btf/vmlinux").exists(),
            t,
            "no kernel BTF",
        )
    {
        return;
    }
    let (linux, mut fw) = common::registered("bp");
    let program = compile_d(
        "syscall::read:entry /ppid == 1/ { self->ts = timestamp; } \
         syscall::read:return /self->ts/ { @[probefunc] = quantize(timestamp - self->ts); \
         self->ts = 0; }",
        &CompileOptions::default(),
    )
    .unwrap();
    let before = Btf::vmlinux_parses();
    linux.plan_all(&[&program]);
    fw.enable(&program, false).unwrap();
    linux.attach_pending().unwrap();
    assert_eq!(Btf::vmlinux_parses() - before, 1);
    assert_eq!(linux.enabled_count(), 2);
    // Let go once attached: a later enabling parses it again.
    let again = compile_d(
        "syscall::write:entry { @ = count(); }",
        &CompileOptions::default(),
    )
    .unwrap();
    linux.plan_all(&[&again]);
    fw.enable(&again, false).unwrap();
    linux.attach_pending().unwrap();
    assert_eq!(Btf::vmlinux_parses() - before, 2);
}
