//! The D compiler behind the handle's [`Compiler`] seam: turns the handle's options (`strsize`,
//! `defaultargs`, `-w`, `-C -D -U -I`, stack frame defaults) into `dtrace-compiler` options, expands a
//! bare `-P/-m/-f` argument into a full probe description, and reports errors in DTrace's words. The
//! embedding program may give it the traced system's C types and probe argument types. The programs it
//! compiles share their identifiers (globals, `self->` variables, aggregations, types), as those of one
//! DTrace handle do.

use dtrace_compiler::{CompileOptions, ProbeInfo, SharedState, SourceKind, StdcMode, TypeSource};
use dtrace_dif::program::{ActionKind, Program};
use dtrace_dif::{DifObject, DifType, Instr};

use crate::error::{ConsumerError, Result};
use crate::handle::{CompileFlags, Compiler, ProbeSpec};
use crate::listing::str2desc;
use crate::options::Options;

/// The D compiler, with the named macro variables set on the handle (`$target`...).
#[derive(Default)]
pub struct DCompiler {
    /// Macro variables set through [`Compiler::set_macro`], overriding the defaults of
    /// [`default_macros`].
    pub macros: Vec<(String, String)>,
    /// Makes the C type sources each compilation sees (the running kernel's types), if any.
    pub types: Option<TypeSources>,
    /// The traced system's probe argument types (`args[]`) and symbols, if known.
    pub probes: Option<Box<dyn ProbeInfo + Send>>,
    /// The identifiers of the programs compiled so far, known to those compiled next.
    pub shared: SharedState,
    /// The data model programs are compiled for (`-32`/`-64`; LP64 by default).
    pub model: dtrace_compiler::DataModel,
}

/// A maker of the type sources one compilation consumes. With `false` it may leave out what is
/// costly to get (a lazily loaded source's typedef names); a compilation that fails so is tried
/// again with `true`.
pub type TypeSources = Box<dyn Fn(bool) -> Vec<Box<dyn TypeSource>> + Send>;

impl std::fmt::Debug for DCompiler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DCompiler")
            .field("macros", &self.macros)
            .field("types", &self.types.is_some())
            .field("probes", &self.probes.is_some())
            .field("shared", &self.shared)
            .finish()
    }
}

/// The named macro variables DTrace defines for every compilation, from this process's ids:
/// `$pid`, `$ppid`, `$uid`, `$gid`, `$euid`, `$egid`, `$pgid`, `$sid`, `$projid` and `$taskid`
/// (0 on Linux), and `$target` (0 until a process is created or grabbed).
pub fn default_macros() -> Vec<(String, String)> {
    // SAFETY: these calls only read the calling process's own ids.
    let (ppid, uid, gid, euid, egid, pgid, sid) = unsafe {
        (
            libc::getppid(),
            libc::getuid(),
            libc::getgid(),
            libc::geteuid(),
            libc::getegid(),
            libc::getpgid(0),
            libc::getsid(0),
        )
    };
    [
        ("egid", egid as i64),
        ("euid", euid as i64),
        ("gid", gid as i64),
        ("pgid", pgid as i64),
        ("pid", std::process::id() as i64),
        ("ppid", ppid as i64),
        ("projid", 0),
        ("sid", sid as i64),
        ("target", 0),
        ("taskid", 0),
        ("uid", uid as i64),
    ]
    .into_iter()
    .map(|(n, v)| (n.to_string(), v.to_string()))
    .collect()
}

fn num(o: &Options, name: &str, default: u32) -> u32 {
    let v = o.value(name);
    if v > 0 {
        v.min(u32::MAX as i64) as u32
    } else {
        default
    }
}

/// A default stack depth, at most `maxframes` when that is set (DTrace for Linux caps the frames a
/// stack records at `maxframes`).
fn frames(o: &Options, name: &str, default: u32) -> u32 {
    let n = num(o, name, default);
    match o.value("maxframes") {
        m if m > 0 => n.min(m.min(u32::MAX as i64) as u32),
        _ => n,
    }
}

/// `-P foo` is `foo:::`, `-m foo` is `:foo::`, `-f foo` is `::foo:`; what follows the description (a
/// predicate or an action) is kept.
pub fn expand_spec(spec: ProbeSpec, source: &str) -> Result<String> {
    if matches!(spec, ProbeSpec::Name | ProbeSpec::Script) {
        return Ok(source.to_string());
    }
    let cut = source.find(['/', '{']).unwrap_or(source.len());
    let d = str2desc(spec, source[..cut].trim()).map_err(ConsumerError::Compile)?;
    Ok(format!(
        "{}:{}:{}:{} {}",
        d.provider,
        d.module,
        d.function,
        d.name,
        &source[cut..]
    ))
}

impl Compiler for DCompiler {
    fn compile(
        &mut self,
        source: &str,
        spec: ProbeSpec,
        flags: CompileFlags,
        argv: &[String],
        o: &Options,
    ) -> Result<Program> {
        if o.string("amin").is_some() {
            return Err(amin_unsupported());
        }
        let mut c = CompileOptions {
            args: if argv.is_empty() {
                vec![String::new()]
            } else {
                argv.to_vec()
            },
            default_args: o.is_set("defaultargs"),
            argref: o.is_set("argref"),
            empty: o.is_set("empty"),
            pspec: o.is_set("pspec"),
            strsize: num(o, "strsize", 256),
            scratchsize: match o.value("scratchsize") {
                v if v > 0 => v as u64,
                _ => 1 << 20,
            },
            destructive: o.is_set("destructive"),
            zdefs: flags.zero_defs || o.is_set("zdefs"),
            stackframes: frames(o, "stackframes", 20),
            ustackframes: frames(o, "ustackframes", 100),
            jstackframes: num(o, "jstackframes", 50),
            jstackstrsize: num(o, "jstackstrsize", 512),
            model: self.model,
            cpp: flags.cpp || o.is_set("cpp"),
            cpp_headers: o.is_set("cpphdrs"),
            defines: o.strings("define").to_vec(),
            undefs: o.strings("undef").to_vec(),
            includes: o.strings("incdir").to_vec(),
            libdirs: o.strings("libdir").to_vec(),
            cpp_args: o.strings("cppargs").to_vec(),
            source: if spec == ProbeSpec::Script {
                SourceKind::File
            } else {
                SourceKind::String
            },
            ..CompileOptions::default()
        };
        let mut macros = default_macros();
        for (n, v) in &self.macros {
            match macros.iter_mut().find(|(k, _)| k == n) {
                Some(slot) => slot.1 = v.clone(),
                None => macros.push((n.clone(), v.clone())),
            }
        }
        c.macros = macros;
        if let Some(p) = o.string("cpppath") {
            c.cpp_path = p.to_string();
        }
        if let Some(m) = o.string("stdc").and_then(StdcMode::from_letter) {
            c.stdc = m;
        }
        let text = expand_spec(spec, source)?;
        let errtags = o.is_set("errtags");
        // The first compilation builds the type table the later ones share; as long as the
        // kernel's types have not been waited for, their typedef names may be missing: a
        // compilation that fails then waits for them and is tried again with them.
        let sources = match &self.types {
            Some(f) if !self.shared.is_started() => f(false),
            _ => Vec::new(),
        };
        let probes = self.probes.as_deref().map(|p| p as &dyn ProbeInfo);
        let mut r = dtrace_compiler::compile_shared(&text, &c, sources, probes, &mut self.shared);
        if let (Err(_), Some(f)) = (&r, &self.types) {
            // The kept table's sources offer their typedef names once the types are loaded.
            drop(f(true));
            if self.shared.refresh_typedef_names() {
                r = dtrace_compiler::compile_shared(
                    &text,
                    &c,
                    Vec::new(),
                    probes,
                    &mut self.shared,
                );
            }
        }
        let mut prog = r.map_err(|e| {
            ConsumerError::Compile(if spec == ProbeSpec::Script {
                e.file_message(errtags)
            } else {
                e.string_message(errtags)
            })
        })?;
        if prog.options.iter().any(|(n, _)| n == "amin") {
            return Err(amin_unsupported());
        }
        give_printf_a_record(&mut prog);
        Ok(prog)
    }

    fn set_macro(&mut self, name: &str, value: &str) {
        match self.macros.iter_mut().find(|(k, _)| k == name) {
            Some(slot) => slot.1 = value.to_string(),
            None => self.macros.push((name.to_string(), value.to_string())),
        }
    }
}

/// `amin` (fail compilations whose attributes are below a minimum) is refused rather than ignored:
/// the probe description attributes it checks need the provider, which the compiler does not see.
fn amin_unsupported() -> ConsumerError {
    ConsumerError::NotSupported(
        "option amin (minimum stability enforcement); dtrace -v reports programs' stability".into(),
    )
}

/// A printf-like action without value arguments still records something, as in DTrace (whose
/// `dt_action_printflike` gives it a `ret %r0` object of type int): otherwise a clause holding only
/// `printf("...")` would store no record and print nothing.
pub fn give_printf_a_record(prog: &mut Program) {
    for ecb in &mut prog.ecbs {
        for a in &mut ecb.actions {
            let printflike = matches!(
                a.kind,
                ActionKind::Printf | ActionKind::System | ActionKind::Freopen
            );
            if printflike && a.difo.is_none() {
                a.difo = Some(DifObject {
                    text: vec![Instr::Ret { rd: 0 }.encode()],
                    rtype: DifType::integer(4),
                    ..DifObject::default()
                });
            }
        }
    }
}

/// The `-S` listing of a compiled program (its DIF, disassembled).
pub fn listing(p: &Program) -> String {
    dtrace_compiler::listing::listing(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn named_macros_default_and_set() {
        let m = default_macros();
        let get = |n: &str| m.iter().find(|(k, _)| k == n).map(|(_, v)| v.clone());
        assert_eq!(get("pid"), Some(std::process::id().to_string()));
        assert_eq!(get("target").as_deref(), Some("0"));
        let mut c = DCompiler::default();
        let o = Options::default();
        let flags = CompileFlags::default();
        // $target is 0 until set; then the set value is used.
        let p = c.compile("BEGIN { trace($target); }", ProbeSpec::Name, flags, &[], &o);
        assert!(p.is_ok(), "{p:?}");
        c.set_macro("target", "4321");
        c.set_macro("target", "1234");
        assert_eq!(c.macros, vec![("target".to_string(), "1234".to_string())]);
        let p = c.compile(
            "BEGIN { trace($target + $uid); }",
            ProbeSpec::Name,
            flags,
            &[],
            &o,
        );
        assert!(p.is_ok(), "{p:?}");
        let e = c.compile("BEGIN { trace($nosuch); }", ProbeSpec::Name, flags, &[], &o);
        assert!(e
            .unwrap_err()
            .to_string()
            .contains("$nosuch is not defined"));
    }

    #[test]
    fn amin_is_refused_not_ignored() {
        let mut c = DCompiler::default();
        let flags = CompileFlags::default();
        let mut o = Options::default();
        let src = "#pragma D option amin=Evolving/Evolving/Common\nBEGIN { trace(1); }";
        let e = c.compile(src, ProbeSpec::Script, flags, &[], &o);
        assert!(matches!(e, Err(ConsumerError::NotSupported(_))), "{e:?}");
        o.set("amin", Some("Evolving/Evolving/Common"), false)
            .expect("set");
        let e = c.compile("BEGIN { trace(1); }", ProbeSpec::Name, flags, &[], &o);
        assert!(matches!(e, Err(ConsumerError::NotSupported(_))), "{e:?}");
    }

    #[test]
    fn programs_share_variable_and_aggregation_ids_by_name() {
        // As on one libdtrace handle: the same name is the same variable (same id, same storage)
        // in every program; other names get ids of their own.
        let mut c = DCompiler::default();
        let (o, flags) = (Options::default(), CompileFlags::default());
        let src = "BEGIN { x = 1; self->t = 2; @a = count(); }";
        let p1 = c.compile(src, ProbeSpec::Name, flags, &[], &o).unwrap();
        let p2 = c.compile(src, ProbeSpec::Name, flags, &[], &o).unwrap();
        let src = "BEGIN { y = 1; self->u = 2; @b = count(); }";
        let p3 = c.compile(src, ProbeSpec::Name, flags, &[], &o).unwrap();
        let ids = |p: &Program| -> Vec<(u8, u32)> {
            p.ecbs[0]
                .actions
                .iter()
                .filter_map(|a| a.difo.as_ref())
                .flat_map(|d| d.vartab.iter().map(|v| (v.scope, v.id)))
                .collect()
        };
        let ubase = dtrace_dif::vars::DIF_VAR_OTHER_UBASE;
        assert_eq!(ids(&p1), [(0, ubase), (1, ubase)]);
        assert_eq!(ids(&p2), [(0, ubase), (1, ubase)]);
        assert_eq!(ids(&p3), [(0, ubase + 1), (1, ubase + 1)]);
        let agg = |p: &Program| p.aggregations[0].id;
        assert_eq!((agg(&p1), agg(&p2), agg(&p3)), (1, 1, 2));
    }
}
