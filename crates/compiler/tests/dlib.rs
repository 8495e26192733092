//! The D library over the running kernel's types (BTF converted to CTF): `curpsinfo`,
//! `curlwpsinfo`, `xlate<psinfo_t *>(curthread)`, whole translated structs in clause-locals and
//! `fileinfo_t`; the DIF they compile to (plain loads off `curthread` for one member, a struct built
//! in scratch for a whole translation) and its verification. Skipped where no BTF is published.

use std::path::Path;
use std::sync::{Arc, OnceLock};

use dtrace_compiler::ctf_types::CtfTypes;
use dtrace_compiler::{compile_with_types, listing, CompileError, CompileOptions};
use dtrace_ctf::{Container, KernelTypes, SYS_KERNEL_BTF};
use dtrace_dif::program::Program;

fn vmlinux() -> Option<Arc<Container>> {
    static K: OnceLock<Option<Arc<Container>>> = OnceLock::new();
    K.get_or_init(|| {
        let have = Path::new(SYS_KERNEL_BTF).join("vmlinux").exists();
        if !have {
            return None;
        }
        let k = KernelTypes::load(Path::new(SYS_KERNEL_BTF)).expect("vmlinux BTF converts");
        Some(Arc::clone(&k.vmlinux))
    })
    .clone()
}

fn have_kernel(test: &str) -> Option<Arc<Container>> {
    let k = vmlinux();
    if !dtrace_testkit::skip_unless(k.is_some(), test, "no /sys/kernel/btf/vmlinux") {
        return None;
    }
    k
}

fn compile_k(k: &Arc<Container>, src: &str) -> Result<Program, CompileError> {
    compile_with_types(
        src,
        &CompileOptions::default(),
        vec![Box::new(CtfTypes::new(Arc::clone(k)))],
    )
}

fn verified(p: &Program) {
    for e in &p.ecbs {
        for o in e
            .predicate
            .iter()
            .chain(e.actions.iter().filter_map(|a| a.difo.as_ref()))
        {
            dtrace_dif::verify::verify(o).unwrap_or_else(|v| panic!("{v:?}\n{}", listing(p)));
        }
    }
}

#[test]
fn curpsinfo_members_are_loads_off_curthread() {
    let Some(k) = have_kernel("curpsinfo_members_are_loads_off_curthread") else {
        return;
    };
    let p = compile_k(
        &k,
        "syscall::openat:entry { trace(curpsinfo->pr_fname); trace(curpsinfo->pr_pid); \
         trace(curpsinfo->pr_ppid); trace(curlwpsinfo->pr_lwpid); trace(curpsinfo->pr_uid); }",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    verified(&p);
    let l = listing(&p);
    assert!(!l.contains("allocs"), "a member needs no struct: {l}");
    // every object starts from curthread (built-in variable 0x100) and loads members off it
    let objs: Vec<_> = p.ecbs[0]
        .actions
        .iter()
        .filter_map(|a| a.difo.as_ref())
        .collect();
    assert_eq!(objs.len(), 5);
    for o in &objs {
        let text = dtrace_dif::disasm::listing_body(o);
        assert!(text.contains("ldgs DT_VAR(256)"), "{text}");
    }
    // pr_fname is the task's comm: a 16-byte char array; pr_pid a 4-byte pid_t
    assert_eq!(objs[0].rtype.size, 16);
    assert_eq!(objs[1].rtype.size, 4);
}

#[test]
fn whole_translations_build_the_struct_in_scratch() {
    let Some(k) = have_kernel("whole_translations_build_the_struct_in_scratch") else {
        return;
    };
    let p = compile_k(
        &k,
        "BEGIN { this->ps = xlate<psinfo_t>(curthread); trace(this->ps.pr_pid); \
         trace(sizeof (this->ps)); this->p = curpsinfo; trace(this->p->pr_ppid); \
         trace(xlate<lwpsinfo_t *>(curthread)->pr_sname); trace(xlate<psinfo_t>(curthread).pr_sid); }",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    verified(&p);
    let l = listing(&p);
    assert_eq!(l.matches("allocs").count(), 2, "{l}");
    // sizeof (psinfo_t) with its nested lwpsinfo_t: 416 bytes, as gcc lays out the same C struct
    let sz = &p.ecbs[0].actions[2];
    let text = dtrace_dif::disasm::listing_body(sz.difo.as_ref().unwrap());
    assert!(text.contains("0x1a0"), "{text}");
}

#[test]
fn fileinfo_from_struct_file() {
    let Some(k) = have_kernel("fileinfo_from_struct_file") else {
        return;
    };
    let p = compile_k(
        &k,
        "BEGIN { f = (struct file *)arg0; trace(xlate<fileinfo_t *>(f)->fi_name); \
         trace(xlate<fileinfo_t>(f).fi_offset); this->fi = xlate<fileinfo_t>(f); \
         trace(this->fi.fi_fs); trace(O_WRONLY | O_CREAT); }",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    verified(&p);
}

#[test]
fn library_errors_read_as_dtrace_writes_them() {
    let Some(k) = have_kernel("library_errors_read_as_dtrace_writes_them") else {
        return;
    };
    let e = compile_k(&k, "BEGIN { trace(curpsinfo->pr_lwp.pr_lwpid); }").unwrap_err();
    assert_eq!(
        e.message,
        "translator does not define conversion for member: pr_lwp"
    );
    let e = compile_k(&k, "BEGIN { trace(curpsinfo->pr_nosuch); }").unwrap_err();
    assert_eq!(e.message, "pr_nosuch is not a member of psinfo_t");
    let e = compile_k(&k, "BEGIN { trace(curpsinfo.pr_pid); }").unwrap_err();
    assert!(e.message.contains("operator . cannot be applied"), "{e}");
    let e = compile_k(&k, "BEGIN { curpsinfo->pr_pid = 1; }").unwrap_err();
    assert!(e.message.contains("writable"), "{e}");
    let e = compile_k(&k, "BEGIN { trace(xlate<psinfo_t *>(1)->pr_pid); }").unwrap_err();
    assert!(e.message.contains("cannot translate from"), "{e}");
}

#[test]
fn user_translators_beside_the_library() {
    let Some(k) = have_kernel("user_translators_beside_the_library") else {
        return;
    };
    let p = compile_k(
        &k,
        "typedef struct mine { int m_pid; string m_name; } mine_t;\n\
         translator mine_t < struct task_struct *T > { m_pid = T->pid; m_name = stringof(T->comm); };\n\
         BEGIN { trace(xlate<mine_t *>(curthread)->m_name); this->m = xlate<mine_t>(curthread); \
         trace(this->m.m_pid); trace(curpsinfo->pr_pid); }",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    verified(&p);
}

#[test]
fn bufinfo_and_devinfo_from_struct_bio() {
    let Some(k) = have_kernel("bufinfo_and_devinfo_from_struct_bio") else {
        return;
    };
    let p = compile_k(
        &k,
        "BEGIN { b = (struct bio *)arg0; trace(xlate<bufinfo_t *>(b)->b_flags & B_READ); \
         trace(xlate<bufinfo_t *>(b)->b_bcount); trace(xlate<devinfo_t *>(b)->dev_statname); \
         trace(xlate<devinfo_t *>(b)->dev_pathname); trace(xlate<devinfo_t *>(b)->dev_major); \
         this->d = xlate<devinfo_t>(b); trace(this->d.dev_minor); }",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    verified(&p);
}

/// Runs each action of the first ECB of `p` and returns the values (strings as text).
fn run_values(
    p: &Program,
    ctx: &mut dtrace_dif::vm::fake::FakeContext,
    mem: &mut dtrace_dif::vm::fake::FakeMemory,
) -> Vec<String> {
    use dtrace_dif::vm::{Machine, VarState, VmOptions};
    let mut state = VarState::new(VmOptions::default());
    let mut m = Machine::new();
    m.begin_firing();
    let mut out = Vec::new();
    for a in &p.ecbs[0].actions {
        let o = a.difo.as_ref().expect("object");
        let r = m
            .run(o, &mut state, ctx, mem)
            .unwrap_or_else(|f| panic!("fault {f:?}\n{}", listing(p)));
        if o.rtype.is_string() {
            let s = m.read_string_result(o, mem, r).expect("string");
            out.push(String::from_utf8_lossy(&s).into_owned());
        } else {
            out.push(r.to_string());
        }
    }
    out
}

#[test]
fn curpsinfo_values_from_a_task_in_memory() {
    let Some(k) = have_kernel("curpsinfo_values_from_a_task_in_memory") else {
        return;
    };
    // the offsets of the running kernel's task_struct, as the compiler sees them
    let offs = compile_k(
        &k,
        "BEGIN { trace(offsetof(struct task_struct, tgid)); trace(offsetof(struct task_struct, pid)); \
         trace(offsetof(struct task_struct, real_parent)); trace(offsetof(struct task_struct, comm)); \
         trace(offsetof(struct task_struct, prio)); trace(sizeof (struct task_struct)); }",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let mut ctx = dtrace_dif::vm::fake::FakeContext::new();
    let mut mem = dtrace_dif::vm::fake::FakeMemory::new();
    let o: Vec<usize> = run_values(&offs, &mut ctx, &mut mem)
        .iter()
        .map(|v| v.parse().unwrap())
        .collect();
    let (tgid, pid, parent, comm, prio, size) = (o[0], o[1], o[2], o[3], o[4], o[5]);
    let (me, dad) = (0x10_0000u64, 0x20_0000u64);
    let mut task = vec![0u8; size];
    task[tgid..tgid + 4].copy_from_slice(&4242i32.to_le_bytes());
    task[pid..pid + 4].copy_from_slice(&4243i32.to_le_bytes());
    task[parent..parent + 8].copy_from_slice(&dad.to_le_bytes());
    task[comm..comm + 6].copy_from_slice(b"mycmd\0");
    task[prio..prio + 4].copy_from_slice(&120i32.to_le_bytes());
    let mut father = vec![0u8; size];
    father[tgid..tgid + 4].copy_from_slice(&1i32.to_le_bytes());
    mem.kernel.insert(me, task);
    mem.kernel.insert(dad, father);
    ctx.ints.insert(dtrace_dif::vars::DIF_VAR_CURTHREAD, me);
    let p = compile_k(
        &k,
        "BEGIN { trace(curpsinfo->pr_pid); trace(curpsinfo->pr_ppid); \
         trace(stringof(curpsinfo->pr_fname)); trace(curlwpsinfo->pr_lwpid); \
         trace(curlwpsinfo->pr_pri); trace(curpsinfo->pr_addr == (uintptr_t)curthread); \
         trace(curpsinfo->pr_dmodel == PR_MODEL_LP64); trace(curpsinfo->pr_zoneid); }",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    verified(&p);
    assert_eq!(
        run_values(&p, &mut ctx, &mut mem),
        ["4242", "1", "mycmd", "4243", "120", "1", "1", "0"]
    );
}

#[test]
fn fds_inline_array() {
    let Some(k) = have_kernel("fds_inline_array") else {
        return;
    };
    let p = compile_k(
        &k,
        "syscall::write:entry { trace(fds[arg0].fi_name); trace(fds[1].fi_oflags & O_WRONLY); \
         this->f = fds[0]; trace(this->f.fi_offset); }",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    verified(&p);
    let e = compile_k(&k, "BEGIN { fds[0] = 1; }").unwrap_err();
    assert_eq!(
        e.message,
        "operator = can only be applied to a writable variable"
    );
    let e = compile_k(&k, "BEGIN { trace(fds[\"a\"].fi_name); }").unwrap_err();
    assert_eq!(e.tag, dtrace_compiler::ErrTag::D_PROTO_ARG, "{e}");
    let e = compile_k(&k, "BEGIN { trace(fds[1, 2].fi_name); }").unwrap_err();
    assert_eq!(e.tag, dtrace_compiler::ErrTag::D_PROTO_LEN, "{e}");
}

#[test]
fn psargs_from_the_argument_strings_in_user_memory() {
    let Some(k) = have_kernel("psargs_from_the_argument_strings_in_user_memory") else {
        return;
    };
    let offs = compile_k(
        &k,
        "BEGIN { trace(offsetof(struct task_struct, mm)); trace(sizeof (struct task_struct)); \
         trace((uintptr_t)&((struct mm_struct *)0)->arg_start); \
         trace((uintptr_t)&((struct mm_struct *)0)->arg_end); \
         trace(sizeof (struct mm_struct)); }",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let mut ctx = dtrace_dif::vm::fake::FakeContext::new();
    let mut mem = dtrace_dif::vm::fake::FakeMemory::new();
    let o: Vec<usize> = run_values(&offs, &mut ctx, &mut mem)
        .iter()
        .map(|v| v.parse().unwrap())
        .collect();
    let (mm_off, tsize, start_off, end_off, msize) = (o[0], o[1], o[2], o[3], o[4]);
    let p = compile_k(&k, "BEGIN { trace(stringof(curpsinfo->pr_psargs)); }")
        .unwrap_or_else(|e| panic!("{e}"));
    verified(&p);
    let (task, mm, args) = (0x10_0000u64, 0x20_0000u64, 0x7fff_0000u64);
    let psargs = |argv: &[u8], with_mm: bool| {
        let mut mem = dtrace_dif::vm::fake::FakeMemory::new();
        let mut t = vec![0u8; tsize];
        if with_mm {
            t[mm_off..mm_off + 8].copy_from_slice(&mm.to_le_bytes());
        }
        let mut m = vec![0u8; msize];
        m[start_off..start_off + 8].copy_from_slice(&args.to_le_bytes());
        let end = args + argv.len() as u64;
        m[end_off..end_off + 8].copy_from_slice(&end.to_le_bytes());
        mem.kernel.insert(task, t);
        mem.kernel.insert(mm, m);
        // The environment follows the arguments.
        let mut user = argv.to_vec();
        user.extend_from_slice(&b"HOME=/root\0".repeat(10));
        mem.user.insert(args, user);
        let mut ctx = dtrace_dif::vm::fake::FakeContext::new();
        ctx.ints.insert(dtrace_dif::vars::DIF_VAR_CURTHREAD, task);
        run_values(&p, &mut ctx, &mut mem).remove(0)
    };
    assert_eq!(psargs(b"ls\0-l\0/tmp\0", true), "ls -l /tmp");
    assert_eq!(psargs(b"ls\0-l\0/tmp\0", false), "");
    let long: Vec<u8> = b"x\0".repeat(60);
    assert_eq!(psargs(&long, true), "x ".repeat(40)[..79].to_string());
}

/// `sched:::wakeup`'s argument types as the Linux provider gives them.
struct Wakeup;

impl dtrace_compiler::ProbeInfo for Wakeup {
    fn arg_types(&self, d: &dtrace_dif::program::ProbeDesc) -> Option<Vec<String>> {
        (d.name == "wakeup").then(|| vec!["lwpsinfo_t *".into(), "psinfo_t *".into()])
    }

    fn arg_native_types(&self, d: &dtrace_dif::program::ProbeDesc) -> Option<Vec<String>> {
        (d.name == "wakeup").then(|| vec!["struct task_struct *".into(); 2])
    }
}

#[test]
fn translated_probe_args_load_the_library_and_key_aggregations() {
    let Some(k) = have_kernel("translated_probe_args_load_the_library_and_key_aggregations") else {
        return;
    };
    // The paper's script names nothing of the library: the probe's argument types load it.
    let p = dtrace_compiler::compile_with(
        "syscall::mmap:entry { self->interested = 1; }\n\
         sched:::wakeup /self->interested/ { @[args[1]->pr_fname] = count(); }\n\
         sched:::wakeup { trace(args[0]->pr_lwpid); trace(args[1]->pr_ppid); }",
        &CompileOptions::default(),
        vec![Box::new(CtfTypes::new(Arc::clone(&k)))],
        Some(&Wakeup),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    verified(&p);
    // `pr_fname` (char [16]) keys the aggregation as a string; the members are loads off args[].
    let l = listing(&p);
    assert!(l.contains("ecb1/action1 returns string"), "{l}");
    // Without the native types the translated types are plain (and here unknown) pointers.
    struct Untyped;
    impl dtrace_compiler::ProbeInfo for Untyped {
        fn arg_types(&self, _: &dtrace_dif::program::ProbeDesc) -> Option<Vec<String>> {
            Some(vec!["lwpsinfo_t *".into(), "psinfo_t *".into()])
        }
    }
    let e = dtrace_compiler::compile_with(
        "sched:::wakeup { trace(args[1]->pr_pid); }",
        &CompileOptions::default(),
        vec![Box::new(CtfTypes::new(Arc::clone(&k)))],
        Some(&Untyped),
    );
    // psinfo_t is loaded (the library is), but args[1] is then a plain psinfo_t pointer: it
    // compiles to a load through it, not to the translator's task_struct loads.
    let code = |p: &Program| {
        let d = p.ecbs[0].actions[0].difo.as_ref().expect("a DIF action");
        (d.text.clone(), d.inttab.clone())
    };
    let plain = code(&e.unwrap_or_else(|e| panic!("{e}")));
    let translated = dtrace_compiler::compile_with(
        "sched:::wakeup { trace(args[1]->pr_pid); }",
        &CompileOptions::default(),
        vec![Box::new(CtfTypes::new(Arc::clone(&k)))],
        Some(&Wakeup),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    verified(&translated);
    assert_ne!(plain, code(&translated));
}

/// The `io` provider's argument types: D types translated from the kernel's `struct request *`.
struct IoArgs;

impl dtrace_compiler::ProbeInfo for IoArgs {
    fn arg_types(&self, d: &dtrace_dif::program::ProbeDesc) -> Option<Vec<String>> {
        (d.provider == "io").then(|| {
            ["bufinfo_t *", "devinfo_t *", "fileinfo_t *"]
                .map(String::from)
                .to_vec()
        })
    }

    fn arg_native_types(&self, d: &dtrace_dif::program::ProbeDesc) -> Option<Vec<String>> {
        (d.provider == "io").then(|| {
            ["struct request *", "struct request *", "struct file *"]
                .map(String::from)
                .to_vec()
        })
    }
}

fn compile_io(k: &Arc<Container>, src: &str) -> Result<Program, CompileError> {
    dtrace_compiler::compile_with(
        src,
        &CompileOptions::default(),
        vec![Box::new(CtfTypes::new(Arc::clone(k)))],
        Some(&IoArgs),
    )
}

#[test]
fn translated_probe_arguments_from_struct_request() {
    let Some(k) = have_kernel("translated_probe_arguments_from_struct_request") else {
        return;
    };
    // The programs name none of the library's types: the argument types load bio.d and io.d.
    let p = compile_io(
        &k,
        "io:::start { trace(args[0]->b_bcount); trace(args[1]->dev_major); \
         trace(args[1]->dev_statname); trace(args[2]->fi_name); trace(arg0); \
         this->b = *args[0]; trace(this->b.b_blkno); }",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    verified(&p);
    // b_bcount (size_t) is the request's 32-bit __data_len: one 32-bit load off the raw argument.
    let p =
        compile_io(&k, "io:::done { trace(args[0]->b_bcount); }").unwrap_or_else(|e| panic!("{e}"));
    let l = listing(&p);
    assert_eq!(l.matches("lduw").count(), 1, "{l}");
    assert_eq!(l.matches("ldx").count(), 0, "{l}");
    assert_eq!(l.matches("ldga").count(), 1, "{l}");
    // A probe whose types are not translated keeps its args[] as they are.
    let e = compile_io(&k, "syscall::read:entry { trace(args[0]->b_bcount); }");
    assert!(e.is_err());
}

#[test]
fn widening_a_member_keeps_its_load_width() {
    let Some(k) = have_kernel("widening_a_member_keeps_its_load_width") else {
        return;
    };
    // __data_len is an unsigned int: read as 4 bytes, then used as a 64-bit value.
    let p = compile_k(
        &k,
        "BEGIN { this->n = (size_t)((struct request *)arg0)->__data_len; trace(this->n); \
         trace(xlate<bufinfo_t *>((struct request *)arg0)->b_bcount); }",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    verified(&p);
    let l = listing(&p);
    assert!(!l.contains("ldx"), "{l}");
    assert_eq!(l.matches("lduw").count(), 2, "{l}");
}
