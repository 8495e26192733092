//! `print()` and `trace()` of objects held by reference, built at the probe (root, BPF, tracefs
//! and the kernel's BTF; skipped otherwise): `print(p)` of a struct, an array, a `char *` and a
//! `void *`, `trace()` of a struct, a typedef'd struct and a `char` array, and `printf("%s")` of
//! a `char` array print exactly what the interpreter prints with DTRACE_KERNEL_RECORDS=0 (the
//! objects are the kernel's `init_uts_ns` names, the same at every firing and every run, and the
//! traced process's own); an object in `copyin()`'s copy is recorded from it, one larger than
//! the copy faults as the interpreter's read past it; a pointer that
//! cannot be read is the interpreter's fault, to the ERROR probe's arguments; `tracemem()` and
//! `trace()` of a copy sized at the probe (`copyin(arg1, arg2)`) record its bytes, and more
//! bytes than it holds are the interpreter's invalid size; `tracemem()` with a size to display
//! known at the probe prints that many; `tracemem()` and `trace()` of objects in `alloca()`
//! memory record its bytes, and faults past what was allocated are the interpreter's; at `fbt` probes (kprobes or fentry), `print()` of a
//! typed argument's member (/dev/null's file operations) and `trace()` of an object reached
//! from it print the same both ways; `-v` says the clauses run in the kernel.

mod common;
use common::{clause_lines, compile_c, have_btf, have_gcc, kernel_ok, test_dir};

const SWITCH: &str = "DTRACE_KERNEL_RECORDS";

/// What `-v` says of a clause run whole at one probe.
const WHOLE: &str = "runs whole in the kernel at 1 probe";

/// The uts names every process of the host's namespace sees.
const UTS: &str = "curthread->nsproxy->uts_ns->name";

/// Writes 32 known bytes to /dev/null twice, then a 4-byte write.
const WRITER: &str = r#"
#include <fcntl.h>
#include <unistd.h>
static const char msg[32] = "abcdefghijklmnopqrstuvwxyz01234";
int main(void) {
    int fd = open("/dev/null", O_WRONLY);
    if (fd < 0) return 1;
    write(fd, msg, 32);
    write(fd, msg + 8, 24);
    write(fd, msg, 4);
    return 0;
}
"#;

/// Whether this test can run here (printing SKIP, or failing under
/// DTRACE_TEST_REQUIRE_KERNEL=1, if not).
fn runs(test: &str) -> bool {
    kernel_ok(test) && have_btf(test) && have_gcc(test)
}

/// The `-c` command of [`WRITER`], built in test directory `tag`.
fn writer(tag: &str) -> String {
    compile_c(&test_dir(tag), "writer", WRITER, &["-O1"])
        .display()
        .to_string()
}

/// Runs `script` over `cmd` with the kernel's records on and off; asserts the same output, and
/// that `-v` says clause 1 runs whole in the kernel. Returns the output.
fn same_both_ways(script: &str, cmd: &str) -> String {
    let in_kernel = |err: &str| clause_lines(err, 1).iter().any(|l| l.contains(WHOLE));
    common::same_both_ways(SWITCH, script, &[], cmd, &in_kernel)
}

#[test]
fn print_of_structs_arrays_and_pointers_prints_the_same_both_ways() {
    let t = "print_of_structs_arrays_and_pointers_prints_the_same_both_ways";
    if !runs(t) {
        return;
    }
    let cmd = writer("kprint-print");
    let script = format!(
        "syscall::write:entry /pid == $target && arg2 == 32/ {{ print(&{UTS}); \
         print(&{UTS}.sysname); print((char *)&{UTS}.release[0]); print((void *)&{UTS}); }}"
    );
    let out = same_both_ways(&script, &cmd);
    // The struct with its members, the array of chars, a char; the void * only its address.
    for want in [
        "(struct new_utsname) {",
        ".sysname = (char [65]) [",
        "(char [65]) [",
        "(char)'L'",
    ] {
        assert!(out.contains(want), "{want}: {out}");
    }
    assert_eq!(out.matches(" = *").count(), 4, "{out}");
    assert!(out.trim_end().ends_with(" = *"), "{out}");
}

#[test]
fn trace_and_printf_of_objects_print_the_same_both_ways() {
    let t = "trace_and_printf_of_objects_print_the_same_both_ways";
    if !runs(t) {
        return;
    }
    let cmd = writer("kprint-trace");
    let script = format!(
        "syscall::write:entry /pid == $target/ {{ trace({UTS}); trace(curthread->cred->uid); \
         trace(curthread->comm); printf(\"<%s>\\n\", {UTS}.sysname); }}"
    );
    let out = same_both_ways(&script, &cmd);
    assert_eq!(out.matches("<Linux>").count(), 3, "{out}");
    // comm: the writer's name, in the bytes trace() prints.
    assert!(out.contains("writer"), "{out}");
}

#[test]
fn an_object_in_copyins_copy_is_recorded_from_it() {
    let t = "an_object_in_copyins_copy_is_recorded_from_it";
    if !runs(t) {
        return;
    }
    let cmd = writer("kprint-copyin");
    let script = "syscall::write:entry /pid == $target && arg2 > 4/ { \
                  trace(*(struct list_head *)copyin(arg1, 16)); }";
    let out = same_both_ways(script, &cmd);
    assert!(
        out.contains("abcdefghijklmnop") && out.contains("ijklmnopqrstuvwx"),
        "{out}"
    );
    // An object larger than the copy: the interpreter's copy is in its alloca area, whose read
    // past the copy faults (invalid size, the bytes read as the address); so does the probe's
    // (the clause takes its copy from its alloca area there too).
    let script = format!(
        "syscall::write:entry /pid == $target && arg2 > 4/ {{ \
         trace(*(struct list_head *)copyin(arg1, 8)); }} {ERROR_CLAUSE}"
    );
    let out = common::same_with_kernel_paths_off(&script, &[], &cmd, &[(1, WHOLE)]);
    let errors: Vec<&str> = out.lines().filter(|l| l.starts_with("ERROR ")).collect();
    let bad_size = dtrace_dif::vm::FaultKind::BadSize.code();
    assert_eq!(errors.len(), 2, "{out}");
    assert!(
        errors
            .iter()
            .all(|l| l.ends_with(&format!(" {bad_size} 0x10"))),
        "{out}"
    );
}

#[test]
fn an_object_that_cannot_be_read_faults_as_in_the_interpreter() {
    let t = "an_object_that_cannot_be_read_faults_as_in_the_interpreter";
    if !runs(t) {
        return;
    }
    let cmd = writer("kprint-fault");
    // arg0 is the descriptor, never a kernel address: the object's read faults after the
    // pointer was recorded; trace(*p) likewise.
    let script = "syscall::write:entry /pid == $target/ { \
                  print((struct new_utsname *)arg0); } \
                  syscall::write:entry /pid == $target/ { trace(*(struct list_head *)arg2); } \
                  dtrace:::ERROR { printf(\"ERROR %d %d %d %d 0x%x\\n\", arg1, arg2, arg3, \
                  arg4, arg5); }";
    let out = common::same_with_kernel_paths_off(script, &[], &cmd, &[(1, WHOLE), (2, WHOLE)]);
    let errors: Vec<&str> = out.lines().filter(|l| l.starts_with("ERROR ")).collect();
    assert_eq!(errors.len(), 6, "{out}");
    // DTRACEFLT_BADADDR (1) at the pointer.
    assert!(
        errors.iter().any(|l| l.ends_with(" 1 0x3"))
            && errors.iter().any(|l| l.ends_with(" 1 0x20")),
        "{out}"
    );
}

/// The ERROR clause of the fault tests: the probe's arguments DTrace gives it.
const ERROR_CLAUSE: &str =
    "dtrace:::ERROR { printf(\"ERROR %d %d %d %d 0x%x\\n\", arg1, arg2, arg3, arg4, arg5); }";

#[test]
fn copies_sized_at_the_probe_record_and_fault_as_in_the_interpreter() {
    let t = "copies_sized_at_the_probe_record_and_fault_as_in_the_interpreter";
    if !runs(t) {
        return;
    }
    let cmd = writer("kprint-sized");
    // The writes are of 32, 24 and 4 bytes: 8 bytes (or a 16-byte object) of the last are past
    // the copy: DTRACEFLT_BADSIZE, with the bytes read as the address.
    for (script, bytes, fault) in [
        (
            "syscall::write:entry /pid == $target/ { tracemem(copyin(arg1, arg2), 8); }",
            ["abcdefgh", "ijklmnop"],
            " 0x8",
        ),
        (
            "syscall::write:entry /pid == $target/ { \
             trace(*(struct list_head *)copyin(arg1, arg2)); }",
            ["abcdefghijklmnop", "ijklmnopqrstuvwx"],
            " 0x10",
        ),
    ] {
        let script = format!("{script} {ERROR_CLAUSE}");
        let out = common::same_with_kernel_paths_off(&script, &[], &cmd, &[(1, WHOLE)]);
        for b in bytes {
            assert!(out.contains(b), "{b}: {out}");
        }
        let errors: Vec<&str> = out.lines().filter(|l| l.starts_with("ERROR ")).collect();
        assert_eq!(errors.len(), 1, "{out}");
        let bad_size = dtrace_dif::vm::FaultKind::BadSize.code();
        assert!(errors[0].ends_with(&format!(" {bad_size}{fault}")), "{out}");
    }
    // A size to display known at the probe: that many bytes of the 32 copied.
    let script = "syscall::write:entry /pid == $target/ { tracemem(copyin(arg1, 32), 32, arg2); }";
    let out = common::same_with_kernel_paths_off(script, &[], &cmd, &[(1, WHOLE)]);
    assert!(out.contains("qrstuvwxyz01234."), "{out}");
    assert!(out.lines().any(|l| l.ends_with("  abcd")), "{out}");
}

#[test]
fn print_of_fbt_arguments_prints_the_same_both_ways() {
    let t = "print_of_fbt_arguments_prints_the_same_both_ways";
    if !runs(t) || !dtrace_testkit::kernel_has(dtrace_testkit::KernelFeature::Kprobes, t) {
        return;
    }
    let cmd = writer("kprint-fbt");
    // /dev/null's file operations (a static object) and the name of its dentry: the same at
    // every write and every run.
    let script = "fbt::vfs_write:entry /pid == $target/ { print(args[0]->f_op); \
                  trace(args[0]->f_path.dentry->d_name); }";
    let out = same_both_ways(script, &cmd);
    assert_eq!(
        out.matches("(struct file_operations) {").count(),
        3,
        "{out}"
    );
    assert!(out.contains(".write = "), "{out}");
}

#[test]
fn objects_in_alloca_memory_record_and_fault_as_in_the_interpreter() {
    let t = "objects_in_alloca_memory_record_and_fault_as_in_the_interpreter";
    if !runs(t) {
        return;
    }
    let cmd = writer("kprint-alloca");
    // Four bytes of each write in 16 zeroed ones, recorded two ways; in another clause, 16
    // bytes from the middle run past the allocation: DTRACEFLT_BADSIZE, the bytes read as the
    // address (the clause records nothing).
    let script = format!(
        "syscall::write:entry /pid == $target/ {{ this->p = (char *)alloca(16); \
         copyinto(arg1, 4, this->p); tracemem(this->p, 16); \
         trace(*(struct list_head *)this->p); }} \
         syscall::write:entry /pid == $target/ {{ this->p = (char *)alloca(16); \
         tracemem(this->p + 8, 16); }} {ERROR_CLAUSE}"
    );
    let out = common::same_with_kernel_paths_off(&script, &[], &cmd, &[(1, WHOLE), (2, WHOLE)]);
    assert_eq!(out.matches("abcd............").count(), 4, "{out}");
    assert_eq!(out.matches("ijkl............").count(), 2, "{out}");
    let errors: Vec<&str> = out.lines().filter(|l| l.starts_with("ERROR ")).collect();
    assert_eq!(errors.len(), 3, "{out}");
    let bad_size = dtrace_dif::vm::FaultKind::BadSize.code();
    assert!(
        errors
            .iter()
            .all(|l| l.ends_with(&format!(" {bad_size} 0x10"))),
        "{out}"
    );
}
