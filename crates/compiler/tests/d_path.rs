//! `d_path()`, `cwd`, `root` and `fileinfo_t`'s `fi_pathname`/`fi_dirname`: the prototype and its
//! errors, the DIF they compile to (a `call d_path` on the address of a `struct path` reached by
//! loads off `curthread`) and the values they give over a task, an fs_struct and a file laid out
//! in fake memory with the running kernel's offsets. Kernel parts skipped where no BTF is published.

use std::path::Path;
use std::sync::Arc;

use dtrace_compiler::ctf_types::CtfTypes;
use dtrace_compiler::{compile, compile_with_types, listing, CompileError, CompileOptions, ErrTag};
use dtrace_ctf::{Container, KernelTypes, SYS_KERNEL_BTF};
use dtrace_dif::program::Program;
use dtrace_dif::vm::fake::{FakeContext, FakeMemory};
use dtrace_dif::vm::{Machine, VarState, VmOptions};

fn kernel(test: &str) -> Option<Arc<Container>> {
    let have = Path::new(SYS_KERNEL_BTF).join("vmlinux").exists();
    if !dtrace_testkit::skip_unless(have, test, "no /sys/kernel/btf/vmlinux") {
        return None;
    }
    let k = KernelTypes::load(Path::new(SYS_KERNEL_BTF)).expect("vmlinux BTF converts");
    Some(Arc::clone(&k.vmlinux))
}

fn compile_k(k: &Arc<Container>, src: &str) -> Result<Program, CompileError> {
    compile_with_types(
        src,
        &CompileOptions::default(),
        vec![Box::new(CtfTypes::new(Arc::clone(k)))],
    )
}

/// Runs every action of the first clause; a fault is `Err` with its kind.
fn run(p: &Program, ctx: &mut FakeContext, mem: &mut FakeMemory) -> Vec<Result<String, String>> {
    let mut state = VarState::new(VmOptions::default());
    let mut m = Machine::new();
    m.begin_firing();
    let mut out = Vec::new();
    for a in &p.ecbs[0].actions {
        let o = a.difo.as_ref().expect("object");
        dtrace_dif::verify::verify(o).unwrap_or_else(|v| panic!("{v:?}\n{}", listing(p)));
        out.push(match m.run(o, &mut state, ctx, mem) {
            Err(f) => Err(format!("{:?}", f.kind)),
            Ok(r) if o.rtype.is_string() => {
                let s = m.read_string_result(o, mem, r).expect("string");
                Ok(String::from_utf8_lossy(&s).into_owned())
            }
            Ok(r) => Ok(r.to_string()),
        });
    }
    out
}

fn ok(v: &[&str]) -> Vec<Result<String, String>> {
    v.iter().map(|s| Ok(s.to_string())).collect()
}

#[test]
fn d_path_prototype() {
    let e = compile("BEGIN { trace(d_path()); }", &CompileOptions::default()).unwrap_err();
    assert_eq!(e.tag, ErrTag::D_PROTO_LEN, "{e}");
    assert_eq!(
        e.message,
        "d_path( ) prototype mismatch: 0 args passed, 1 expected"
    );
    let e = compile("BEGIN { trace(d_path(1)); }", &CompileOptions::default()).unwrap_err();
    assert_eq!(e.tag, ErrTag::D_PROTO_ARG, "{e}");
    assert!(e.message.contains("prototype: struct path *"), "{e}");
    let e = compile(
        "BEGIN { trace(d_path(\"/\")); }",
        &CompileOptions::default(),
    )
    .unwrap_err();
    assert_eq!(e.tag, ErrTag::D_PROTO_ARG, "{e}");
    // A string result: strlen() and string comparison take it.
    let p = compile(
        "BEGIN { trace(strlen(d_path((void *)arg0))); } BEGIN /d_path((void *)arg0) == \"/\"/ { }",
        &CompileOptions::default(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(listing(&p).contains("! d_path"), "{}", listing(&p));
}

#[test]
fn d_path_of_an_address_runs_in_the_vm() {
    let p = compile(
        "BEGIN { trace(d_path((void *)arg0)); trace(dirname(d_path((void *)arg0))); }",
        &CompileOptions::default(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let mut ctx = FakeContext::new();
    ctx.args = vec![0xffff_8880_0000_2000];
    let mut mem = FakeMemory::new();
    mem.paths
        .insert(0xffff_8880_0000_2000, b"/var/log/syslog".to_vec());
    assert_eq!(
        run(&p, &mut ctx, &mut mem),
        ok(&["/var/log/syslog", "/var/log"])
    );
    ctx.args = vec![0x10];
    assert_eq!(
        run(&p, &mut ctx, &mut mem),
        vec![Err("BadAddr".to_string()), Err("BadAddr".to_string())]
    );
}

/// Offsets of the running kernel's structures, as the compiler sees them.
fn offsets(k: &Arc<Container>, exprs: &[&str]) -> Vec<u64> {
    let src = format!(
        "BEGIN {{ {} }}",
        exprs
            .iter()
            .map(|e| format!("trace((uint64_t)({e}));"))
            .collect::<String>()
    );
    let p = compile_k(k, &src).unwrap_or_else(|e| panic!("{e}"));
    run(&p, &mut FakeContext::new(), &mut FakeMemory::new())
        .into_iter()
        .map(|v| v.expect("offset").parse().expect("a number"))
        .collect()
}

#[test]
fn cwd_and_root_are_d_path_of_the_fs_struct() {
    let Some(k) = kernel("cwd_and_root_are_d_path_of_the_fs_struct") else {
        return;
    };
    let o = offsets(
        &k,
        &[
            "offsetof(struct task_struct, fs)",
            "sizeof (struct task_struct)",
            "offsetof(struct fs_struct, pwd)",
            "offsetof(struct fs_struct, root)",
            "sizeof (struct fs_struct)",
        ],
    );
    let (fs_off, tsize, pwd, root, fsize) = (o[0], o[1], o[2], o[3], o[4]);
    let (task, fs) = (0x10_0000u64, 0x20_0000u64);
    let mut t = vec![0u8; tsize as usize];
    t[fs_off as usize..fs_off as usize + 8].copy_from_slice(&fs.to_le_bytes());
    let mut mem = FakeMemory::new();
    mem.kernel.insert(task, t);
    mem.kernel.insert(fs, vec![0u8; fsize as usize]);
    mem.paths.insert(fs + pwd, b"/home/user/src".to_vec());
    mem.paths.insert(fs + root, b"/".to_vec());
    let mut ctx = FakeContext::new();
    ctx.ints.insert(dtrace_dif::vars::DIF_VAR_CURTHREAD, task);
    let p = compile_k(
        &k,
        "BEGIN { trace(cwd); trace(root); trace(basename(cwd)); }",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let l = listing(&p);
    assert!(l.contains("! d_path"), "{l}");
    assert_eq!(
        run(&p, &mut ctx, &mut mem),
        ok(&["/home/user/src", "/", "src"])
    );
    // Built-ins: not assignable.
    assert!(compile_k(&k, "BEGIN { cwd = \"x\"; }").is_err());
    // A kernel thread has no fs_struct: reading through it faults, as in DTrace.
    let mut t = vec![0u8; tsize as usize];
    t[0] = 1;
    mem.kernel.insert(task, t);
    assert_eq!(run(&p, &mut ctx, &mut mem)[0], Err("BadAddr".to_string()));
}

#[test]
fn fileinfo_paths_from_the_file_path() {
    let Some(k) = kernel("fileinfo_paths_from_the_file_path") else {
        return;
    };
    let o = offsets(
        &k,
        &[
            "offsetof(struct file, f_path)",
            "sizeof (struct file)",
            "offsetof(struct path, dentry)",
            "&((struct dentry *)0)->d_name.name",
            "sizeof (struct dentry)",
        ],
    );
    let (f_path, fsize, p_dentry, d_name, dsize) = (o[0], o[1], o[2], o[3], o[4]);
    let (file, dentry, name) = (0x30_0000u64, 0x40_0000u64, 0x50_0000u64);
    let mut f = vec![0u8; fsize as usize];
    let at = (f_path + p_dentry) as usize;
    f[at..at + 8].copy_from_slice(&dentry.to_le_bytes());
    let mut d = vec![0u8; dsize as usize];
    d[d_name as usize..d_name as usize + 8].copy_from_slice(&name.to_le_bytes());
    let mut mem = FakeMemory::new();
    mem.kernel.insert(file, f);
    mem.kernel.insert(dentry, d);
    mem.kernel.insert(name, b"passwd\0".to_vec());
    mem.paths.insert(file + f_path, b"/etc/passwd".to_vec());
    let mut ctx = FakeContext::new();
    ctx.args = vec![file];
    let p = compile_k(
        &k,
        "BEGIN { trace(xlate <fileinfo_t> ((struct file *)arg0).fi_pathname); \
         trace(xlate <fileinfo_t> ((struct file *)arg0).fi_dirname); \
         trace(xlate <fileinfo_t> ((struct file *)arg0).fi_name); \
         trace(xlate <fileinfo_t> ((struct file *)0).fi_pathname); \
         trace(xlate <fileinfo_t> ((struct file *)0).fi_dirname); }",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        run(&p, &mut ctx, &mut mem),
        ok(&["/etc/passwd", "/etc", "passwd", "<none>", "<none>"])
    );
}
