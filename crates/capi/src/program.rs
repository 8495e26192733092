//! Programs (`dt_program`): `dtrace_program_strcompile`, `dtrace_program_fcompile`,
//! `dtrace_program_exec` and `dtrace_program_info`. A `dtrace_prog_t *` is the address of a
//! program the handle owns until it is closed.

use std::ffi::{c_char, c_int};
use std::io::Read;

use dtrace_consumer::handle::{CompileFlags, ProbeSpec};

use crate::ctypes::{
    ProgInfo, DTRACE_C_CPP, DTRACE_C_CTL, DTRACE_C_DEFARG, DTRACE_C_DIFV, DTRACE_C_EATTR,
    DTRACE_C_ETAGS, DTRACE_C_MASK, DTRACE_C_ZDEFS, DTRACE_PROBESPEC_FUNC, DTRACE_PROBESPEC_MOD,
    DTRACE_PROBESPEC_NAME, DTRACE_PROBESPEC_NONE, DTRACE_PROBESPEC_PROVIDER,
};
use crate::errno::{Edt, Fail};
use crate::ffi::{self, CFile};
use crate::hdl::{self, DtraceProg, Hdl, Prog};

/// What the source of a compilation is.
pub enum Source<'a> {
    /// `dtrace_program_strcompile`: a string, its bare descriptions read as `spec` says.
    Str(&'a str, ProbeSpec),
    /// `dtrace_program_fcompile`: a script's text.
    Script(&'a str),
}

/// The probe specifier a `dtrace_probespec_t` names.
pub fn spec_of(spec: c_int) -> Result<ProbeSpec, Fail> {
    Ok(match spec {
        DTRACE_PROBESPEC_PROVIDER => ProbeSpec::Provider,
        DTRACE_PROBESPEC_MOD => ProbeSpec::Module,
        DTRACE_PROBESPEC_FUNC => ProbeSpec::Function,
        DTRACE_PROBESPEC_NAME | DTRACE_PROBESPEC_NONE => ProbeSpec::Name,
        _ => return Err(Fail::code(libc::EINVAL)),
    })
}

/// The compile flags of `cflags`, with the options they stand for (`DTRACE_C_ETAGS` is the
/// `errtags` option, `DTRACE_C_DEFARG` `defaultargs`).
fn flags_of(cflags: u32) -> Result<(CompileFlags, Vec<&'static str>), Fail> {
    if cflags & !DTRACE_C_MASK != 0 {
        return Err(Fail::code(libc::EINVAL));
    }
    for (bit, name) in [
        (DTRACE_C_EATTR, "DTRACE_C_EATTR (minimum attribute checks)"),
        (DTRACE_C_CTL, "DTRACE_C_CTL (control directives only)"),
    ] {
        if cflags & bit != 0 {
            return Err(Fail::unsupported(name));
        }
    }
    let mut options = Vec::new();
    if cflags & DTRACE_C_ETAGS != 0 {
        options.push("errtags");
    }
    if cflags & DTRACE_C_DEFARG != 0 {
        options.push("defaultargs");
    }
    let flags = CompileFlags {
        zero_defs: cflags & DTRACE_C_ZDEFS != 0,
        cpp: cflags & DTRACE_C_CPP != 0,
        show_dif: cflags & DTRACE_C_DIFV != 0,
        no_exec: false,
    };
    Ok((flags, options))
}

/// Compiles `src` on the handle; returns the program's address.
pub fn compile(
    hdl: &Hdl,
    src: Source<'_>,
    cflags: u32,
    argc: c_int,
    argv: *const *const c_char,
) -> Result<*mut DtraceProg, Fail> {
    let (flags, options) = flags_of(cflags)?;
    let argv = ffi::c_argv(argc, argv).ok_or(Fail::code(libc::EINVAL))?;
    let mut inner = hdl.inner()?;
    let saved = inner.h.decoder.options.clone();
    for o in &options {
        inner.h.setopt(o, None).map_err(Fail::from)?;
    }
    let r = match src {
        Source::Str(s, spec) => inner.h.compile_str(s, spec, flags, &argv),
        Source::Script(s) => inner.h.compile_script(s, flags, &argv),
    };
    if !options.is_empty() {
        inner.h.decoder.options = saved;
    }
    let prog = r.map_err(Fail::from)?;
    if flags.show_dif {
        eprint!("{}", dtrace_consumer::dcompile::listing(&prog));
    }
    let b = Box::new(Prog {
        prog,
        matches: None,
    });
    let p = (&*b as *const Prog).cast_mut().cast::<DtraceProg>();
    inner.progs.push(b);
    Ok(p)
}

/// Reads a script from the caller's stream.
pub fn read_script(fp: *mut libc::FILE) -> Result<String, Fail> {
    if fp.is_null() {
        return Err(Fail::code(libc::EINVAL));
    }
    let mut text = Vec::new();
    CFile(fp)
        .read_to_end(&mut text)
        .map_err(|_| Fail::edt(Edt::Fio))?;
    String::from_utf8(text).map_err(|_| Fail::edt(Edt::Fio))
}

/// `dtrace_program_exec`: enables the program (after telling the tracer about every program
/// compiled on the handle, which share their thread-locals) and describes it.
pub fn exec(hdl: &Hdl, p: *mut DtraceProg) -> Result<ProgInfo, Fail> {
    let mut inner = hdl.inner()?;
    if inner.h.going() || inner.h.stopped() {
        return Err(Fail::edt(Edt::Active));
    }
    let prog = hdl::prog_of(&mut inner, p)?.prog.clone();
    inner.can_trace()?;
    {
        let inner = &mut *inner;
        let all: Vec<&dtrace_dif::program::Program> = inner.progs.iter().map(|b| &b.prog).collect();
        inner.h.plan(&all);
    }
    let info = inner.h.exec(&prog).map_err(|e| {
        let mut f = Fail::from(e);
        // Enabling fails as DTrace's does, unless the reason has a code of its own.
        let own = [
            Edt::Compiler as i32,
            Edt::NoProbe as i32,
            Edt::Active as i32,
            Edt::BadOptName as i32,
            Edt::BadOptVal as i32,
            libc::ENOTSUP,
        ];
        if !own.contains(&f.errno) {
            f.errno = Edt::EnablingErr as i32;
        }
        f
    })?;
    let matches = u32::try_from(info.matches).unwrap_or(u32::MAX);
    hdl::prog_of(&mut inner, p)?.matches = Some(matches);
    hdl.note_descriptions(&inner, &[&prog]);
    let pr = Prog {
        prog,
        matches: Some(matches),
    };
    Ok(hdl::proginfo(&mut inner, &pr))
}

/// `dtrace_program_info`.
pub fn info(hdl: &Hdl, p: *mut DtraceProg) -> Result<ProgInfo, Fail> {
    let mut inner = hdl.inner()?;
    let pr = hdl::prog_of(&mut inner, p)?;
    let pr = Prog {
        prog: pr.prog.clone(),
        matches: pr.matches,
    };
    Ok(hdl::proginfo(&mut inner, &pr))
}
