//! The running kernel's types (BTF converted to CTF) through the compiler: `curthread->pid`,
//! casts to kernel structs, typedefs from BTF. Skipped (with a reason) where no BTF is published.

use std::path::Path;
use std::sync::Arc;

use dtrace_compiler::ctf_types::CtfTypes;
use dtrace_compiler::{compile_with_types, CompileOptions};
use dtrace_ctf::{KernelTypes, SYS_KERNEL_BTF};

#[test]
fn kernel_btf_types_compile() {
    let have = Path::new(SYS_KERNEL_BTF).join("vmlinux").exists();
    if !dtrace_testkit::skip_unless(
        have,
        "kernel_btf_types_compile",
        "no /sys/kernel/btf/vmlinux",
    ) {
        return;
    }
    let k = KernelTypes::load(Path::new(SYS_KERNEL_BTF)).expect("vmlinux BTF converts");
    let src = r#"
        BEGIN {
            trace(curthread->pid);
            trace(((struct task_struct *)arg0)->tgid);
            trace(stringof(curthread->comm));
            trace(sizeof (struct task_struct) > 0);
            trace((pid_t)arg1);
        }
    "#;
    let t0 = std::time::Instant::now();
    let plain = CtfTypes::new(Arc::clone(&k.vmlinux));
    compile_with_types(
        "BEGIN { trace(1); }",
        &CompileOptions::default(),
        vec![Box::new(plain)],
    )
    .expect("compiles");
    eprintln!("trivial program with vmlinux types: {:?}", t0.elapsed());
    // steady state (figures, not asserted): building the source, and a compile that loads the D
    // library (curpsinfo...) against the kernel's types
    let (mut make, mut trivial, mut lib) = (u128::MAX, u128::MAX, u128::MAX);
    for _ in 0..10 {
        let t = std::time::Instant::now();
        let s = CtfTypes::new(Arc::clone(&k.vmlinux));
        make = make.min(t.elapsed().as_micros());
        let t = std::time::Instant::now();
        compile_with_types(
            "BEGIN { trace(1); }",
            &CompileOptions::default(),
            vec![Box::new(s)],
        )
        .expect("compiles");
        trivial = trivial.min(t.elapsed().as_micros());
        let s = CtfTypes::new(Arc::clone(&k.vmlinux));
        let t = std::time::Instant::now();
        compile_with_types(
            "BEGIN { trace(curpsinfo->pr_pid); trace(curlwpsinfo->pr_sname); }",
            &CompileOptions::default(),
            vec![Box::new(s)],
        )
        .expect("compiles");
        lib = lib.min(t.elapsed().as_micros());
    }
    eprintln!("best of 10: CtfTypes::new {make} us, trivial compile {trivial} us, curpsinfo compile {lib} us");
    let source = CtfTypes::new(Arc::clone(&k.vmlinux));
    let start = std::time::Instant::now();
    let p = compile_with_types(src, &CompileOptions::default(), vec![Box::new(source)])
        .unwrap_or_else(|e| panic!("{e}"));
    eprintln!("compiled against vmlinux types in {:?}", start.elapsed());
    let a = &p.ecbs[0].actions;
    // pid_t is 4 bytes; comm is a char array
    assert_eq!(a[0].difo.as_ref().unwrap().rtype.size, 4);
    assert!(a[2].difo.as_ref().unwrap().rtype.is_string());
    for x in a {
        if let Some(o) = &x.difo {
            dtrace_dif::verify::verify(o).expect("verifies");
        }
    }
}

/// A D definition shadows a kernel type of the same name (DTrace searches its D definitions before
/// the kernel's types); only a second D definition is a redeclaration.
#[test]
fn d_definitions_shadow_kernel_types() {
    let have = Path::new(SYS_KERNEL_BTF).join("vmlinux").exists();
    if !dtrace_testkit::skip_unless(
        have,
        "d_definitions_shadow_kernel_types",
        "no /sys/kernel/btf/vmlinux",
    ) {
        return;
    }
    let k = KernelTypes::load(Path::new(SYS_KERNEL_BTF)).expect("vmlinux BTF converts");
    let compile = |src: &str| {
        compile_with_types(
            src,
            &CompileOptions::default(),
            vec![Box::new(CtfTypes::new(Arc::clone(&k.vmlinux)))],
        )
    };
    // The kernel has struct timespec64 (16 bytes) and struct task_struct.
    let p =
        compile("struct timespec64 { int mine; }; BEGIN { trace(sizeof (struct timespec64)); }")
            .expect("shadowing struct compiles");
    assert_eq!(p.ecbs.len(), 1);
    let k16 = compile("BEGIN { trace(sizeof (struct timespec64)); }").expect("kernel struct");
    assert_ne!(
        format!("{:?}", p.ecbs[0].actions[0].difo),
        format!("{:?}", k16.ecbs[0].actions[0].difo),
        "sizeof sees the D struct (4 bytes), not the kernel's (16)"
    );
    compile("typedef struct task_struct kthread_t; typedef int kthread_t; BEGIN { }")
        .expect_err("a second D typedef is a redeclaration");
    compile("struct timespec64 { int a; }; struct timespec64 { int b; }; BEGIN { }")
        .expect_err("a second D definition is a redeclaration");
    compile("struct fwd; struct fwd { int x; }; BEGIN { this->p = (struct fwd *)alloca(4); this->p->x = 1; }")
        .expect("a D forward declaration completed in D");
}

/// A kernel typedef whose name D also defines with another size (`dev_t`: 32-bit in Linux, 64-bit
/// in D) keeps the kernel's size inside kernel structs; the name stays D's in the program.
#[test]
fn kernel_typedefs_keep_their_size_inside_kernel_types() {
    let have = Path::new(SYS_KERNEL_BTF).join("vmlinux").exists();
    if !dtrace_testkit::skip_unless(
        have,
        "kernel_typedefs_keep_their_size_inside_kernel_types",
        "no /sys/kernel/btf/vmlinux",
    ) {
        return;
    }
    let k = KernelTypes::load(Path::new(SYS_KERNEL_BTF)).expect("vmlinux BTF converts");
    let src = "BEGIN { trace(sizeof (((struct super_block *)0)->s_dev)); trace(sizeof (dev_t)); }";
    let p = compile_with_types(
        src,
        &CompileOptions::default(),
        vec![Box::new(CtfTypes::new(Arc::clone(&k.vmlinux)))],
    )
    .expect("compiles");
    let consts: Vec<String> = p.ecbs[0]
        .actions
        .iter()
        .filter_map(|a| a.difo.as_ref())
        .map(|d| format!("{:?}", d.inttab))
        .collect();
    assert_eq!(consts, ["[4]", "[8]"], "{consts:?}");
}
