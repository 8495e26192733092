//! `dtrace -G`: compiles each script or description and writes it as a relocatable ELF object whose
//! `.SUNW_dof` section holds the program's DOF, named as DTrace names it (the `-o` path when there is
//! one program, else `name.o` for a script `name.d`, else `d.out`, or `d.out.N` among several); with
//! several programs and `-o`, the objects are then joined into the `-o` file by `ld -r`, as DTrace
//! does. Operands after the options are relocatable objects built with a `dtrace -h` header: their
//! probe call sites are rewritten in place and described in the DOF's providers, and the object
//! written defines the probe and is-enabled functions the header declares (`dtrace_dof::usdt_link`
//! has the design).

use std::process::ExitCode;

use dtrace_consumer::handle::{CompileFlags, Handle, NoTracer};
use dtrace_dif::program::Program;
use dtrace_dif::program::ProviderDecl;
use dtrace_dof::program::{program_to_dof, ProgramDofExtras};
use dtrace_dof::usdt_link;
use dtrace_dof::Utsname;

use crate::args::{Cmd, Config};
use crate::{fatal, io_reason, spec_of, usage, E_USAGE};

/// The output path of command `i` of `n` (DTrace's `link_prog`).
pub fn output_name(cmd: &Cmd, i: usize, n: usize, ofile: Option<&str>) -> String {
    if let (1, Some(o)) = (n, ofile) {
        return o.to_string();
    }
    if let Some(stem) = cmd.arg.strip_suffix(".d").filter(|_| cmd.kind == 's') {
        let base = stem.rsplit('/').next().unwrap_or(stem);
        return format!("{base}.o");
    }
    if n > 1 {
        format!("d.out.{i}")
    } else {
        "d.out".to_string()
    }
}

/// This machine's `uname`, for the DOF's `UTSNAME` section.
fn utsname() -> Option<Utsname> {
    // SAFETY: `uname` fills the zeroed struct it is given; every field is NUL-terminated.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    if unsafe { libc::uname(&mut u) } != 0 {
        return None;
    }
    let field = |f: &[libc::c_char]| {
        let b: Vec<u8> = f
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect();
        String::from_utf8_lossy(&b).into_owned()
    };
    let f = [
        field(&u.sysname),
        field(&u.nodename),
        field(&u.release),
        field(&u.version),
        field(&u.machine),
    ];
    Some(Utsname::new([&f[0], &f[1], &f[2], &f[3], &f[4]]))
}

fn arch() -> Option<object::Architecture> {
    if cfg!(target_arch = "x86_64") {
        Some(object::Architecture::X86_64)
    } else if cfg!(target_arch = "aarch64") {
        Some(object::Architecture::Aarch64)
    } else {
        None
    }
}

/// Compiles every `-s`/`-n`/`-P`/... program of `cfg` without tracing anything, as `-G` and `-h`
/// do (`-Z` implied: the probes need not exist here); with `-S`, each one's DIF is listed.
pub fn compile_all(pname: &str, cfg: &Config) -> Result<Vec<Program>, ExitCode> {
    // Nothing is traced: the handle needs no tracer.
    let mut h = Handle::open(
        Box::new(NoTracer("dtrace -G does not trace".into())),
        Some(dtrace_open::backend::compiler()),
    );
    if let Some(code) = crate::set_options(&mut h, cfg) {
        return Err(code);
    }
    let flags = CompileFlags {
        zero_defs: true,
        cpp: cfg.cpp,
        show_dif: cfg.show_dif,
        no_exec: true,
    };
    let mut out = Vec::new();
    for cmd in &cfg.cmds {
        let prog = if cmd.kind == 's' {
            if let Err(e) = std::fs::metadata(&cmd.arg) {
                return Err(fatal(&format!(
                    "failed to open {}: {}",
                    cmd.arg,
                    io_reason(&e)
                )));
            }
            match h.compile_file(
                std::path::Path::new(&cmd.arg),
                flags,
                std::slice::from_ref(&cmd.arg),
            ) {
                Ok(p) => p,
                Err(e) => return Err(fatal(&format!("failed to compile script {}: {e}", cmd.arg))),
            }
        } else {
            match h.compile_str(&cmd.arg, spec_of(cmd.kind), flags, &[pname.to_string()]) {
                Ok(p) => p,
                Err(e) => return Err(fatal(&format!("invalid probe specifier {}: {e}", cmd.arg))),
            }
        };
        if cfg.show_dif {
            eprint!("{}", dtrace_consumer::dcompile::listing(&prog));
        }
        out.push(prog);
    }
    Ok(out)
}

/// Runs `dtrace -G`.
pub fn run(pname: &str, cfg: &Config) -> ExitCode {
    if cfg.cmds.is_empty() {
        eprintln!("{pname}: -G requires one or more scripts or enabling options");
        return ExitCode::from(E_USAGE);
    }
    let Some(arch) = arch() else {
        return fatal("-G: not yet supported: ELF objects for this architecture");
    };
    let progs = match compile_all(pname, cfg) {
        Ok(p) => p,
        Err(code) => return code,
    };
    let extras = ProgramDofExtras {
        comments: Some(usage::VERSION.to_string()),
        utsname: utsname(),
    };
    // The objects' probe sites, found and rewritten in memory; the files change once the DOF is out.
    let mut objects = Vec::new();
    for path in &cfg.args {
        let bytes = match std::fs::read(path) {
            Ok(b) => b,
            Err(e) => return fatal(&format!("failed to open {path}: {}", io_reason(&e))),
        };
        match usdt_link::process_object(&bytes) {
            Ok(p) => objects.push((path, p)),
            Err(e) => return fatal(&format!("failed to process {path}: {e}")),
        }
    }
    let sites: Vec<_> = objects.iter().flat_map(|(_, o)| o.sites.clone()).collect();
    // Each provider belongs to the first program declaring it.
    let mut seen = std::collections::HashSet::new();
    let decls: Vec<Vec<ProviderDecl>> = progs
        .iter()
        .map(|p| {
            p.providers
                .iter()
                .filter(|d| seen.insert(d.name.clone()))
                .cloned()
                .collect()
        })
        .collect();
    let all: Vec<ProviderDecl> = decls.iter().flatten().cloned().collect();
    if let Err(e) = usdt_link::providers_from_sites(&all, &sites) {
        return fatal(&format!("failed to link: {e}"));
    }
    let n = cfg.cmds.len();
    let mut outputs = Vec::new();
    for (i, ((cmd, prog), decls)) in cfg.cmds.iter().zip(&progs).zip(&decls).enumerate() {
        let out = output_name(cmd, i, n, cfg.output.as_deref());
        let mine: Vec<_> = sites
            .iter()
            .filter(|s| decls.iter().any(|d| d.name == s.provider))
            .cloned()
            .collect();
        let stubs = if objects.is_empty() {
            Vec::new()
        } else {
            usdt_link::stub_names(decls)
        };
        let linked = usdt_link::providers_from_sites(decls, &mine)
            .map_err(|e| e.to_string())
            .and_then(|provs| {
                let f = program_to_dof(prog, &extras).map_err(|e| e.to_string())?;
                usdt_link::encode_with_providers(f, &provs).map_err(|e| e.to_string())
            })
            .and_then(|(dof, relocs)| {
                dtrace_dof::dof_to_elf_with_stubs(&dof, arch, &relocs, &stubs)
                    .map_err(|e| e.to_string())
            })
            .and_then(|elf| {
                std::fs::write(&out, elf)
                    .map_err(|e| format!("failed to write {out}: {}", io_reason(&e)))
            });
        if let Err(e) = linked {
            return fatal(&format!("failed to link {} {}: {e}", cmd.desc(), cmd.arg));
        }
        outputs.push(out);
    }
    for (path, o) in &objects {
        if o.sites.is_empty() {
            continue;
        }
        if let Err(e) = std::fs::write(path, &o.bytes) {
            return fatal(&format!("failed to write {path}: {}", io_reason(&e)));
        }
    }
    if let (true, Some(o)) = (n > 1, cfg.output.as_deref()) {
        let r = std::process::Command::new("ld")
            .arg("-r")
            .arg("-o")
            .arg(o)
            .args(&outputs)
            .output();
        match r {
            Ok(r) if r.status.success() => {}
            Ok(r) => {
                return fatal(&format!(
                    "failed to link {o}: {}",
                    String::from_utf8_lossy(&r.stderr).trim_end()
                ))
            }
            Err(e) => return fatal(&format!("failed to link {o}: ld: {}", io_reason(&e))),
        }
    }
    ExitCode::SUCCESS
}
