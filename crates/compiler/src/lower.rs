//! Lowering cooked clauses to the program the framework executes: one ECB per probe description,
//! the predicate and every planned action compiled to its DIF object, and the program-wide tables
//! (formats, aggregations, options).

use dtrace_dif::object::{DifType, DIF_TF_BYREF};
use dtrace_dif::program::{ActionDesc, ActionKind, EcbDesc, ProbeDesc};

use crate::cg::Cg;
use crate::check::{Checker, Cooked};
use crate::error::{err, CResult, ErrTag};
use crate::types::TypeId;

/// Parses `provider:module:function:name` (fewer fields are right-aligned, as DTrace does).
pub fn probe_desc(spec: &str, line: u32) -> CResult<ProbeDesc> {
    let parts: Vec<&str> = spec.split(':').collect();
    if parts.len() > 4 {
        return err(
            ErrTag::D_PDESC_INVAL,
            line,
            format!("invalid probe description \"{spec}\": Overspecified probe description"),
        );
    }
    let mut f = [""; 4];
    let off = 4 - parts.len();
    for (i, p) in parts.iter().enumerate() {
        f[off + i] = p;
    }
    Ok(ProbeDesc {
        provider: f[0].to_string(),
        module: f[1].to_string(),
        function: f[2].to_string(),
        name: f[3].to_string(),
    })
}

impl<'o> Checker<'o> {
    /// A DIF object builder for this program (its spill slots are clause-locals of the program).
    fn cg(&mut self) -> Cg<'_> {
        Cg::new(
            &self.types,
            self.strsize,
            &mut self.locals,
            self.basic.int64,
        )
    }

    /// Compiles a cooked clause into ECB descriptions for each of its probe specifiers.
    pub fn lower(&mut self, probes: &[(String, u32)], c: &Cooked) -> CResult<Vec<EcbDesc>> {
        let predicate = match &c.pred {
            Some(p) => Some(self.cg().object(p, false)?),
            None => None,
        };
        let mut actions = Vec::new();
        for p in &c.plans {
            let mut difo = match &p.expr {
                Some(e) => Some(self.cg().object(e, p.void_result)?),
                None => None,
            };
            match (p.kind, difo.as_mut()) {
                (ActionKind::Tracemem, Some(d)) => {
                    // tracemem(addr, n): the address is returned by reference, n bytes recorded.
                    d.rtype.flags |= DIF_TF_BYREF;
                    d.rtype.size = u32::try_from(p.arg).unwrap_or(u32::MAX);
                }
                (ActionKind::TracememDynsize, Some(d)) => {
                    // Its dynamic size is always a 64-bit integer record (libdtrace's dt_int_rtype).
                    d.rtype = DifType::integer(8);
                }
                _ => {}
            }
            actions.push(ActionDesc {
                kind: p.kind,
                difo,
                arg: p.arg,
                uarg: p.uarg,
                ntuple: p.ntuple,
            });
        }
        let mut out = Vec::new();
        for (spec, line) in probes {
            out.push(EcbDesc {
                probe: probe_desc(spec, *line)?,
                predicate: predicate.clone(),
                actions: actions.clone(),
                line: *line,
            });
        }
        Ok(out)
    }
}

impl Checker<'_> {
    /// The program's largest tuple and largest dynamic variable, in bytes (`Program::max_tuple_size`
    /// and `max_dvar_size`): over the associative arrays' and aggregations' keys, and the values of
    /// thread-locals and associative arrays.
    pub fn dynvar_sizes(&self) -> (u32, u32) {
        // Strings take their storage: strsize characters and the NUL.
        let diftype = |t: TypeId| self.types.diftype(t, self.strsize.saturating_add(1));
        let tuple = |keys: &[TypeId]| {
            dtrace_dif::vm::dynvar::tuple_size(keys.iter().map(|&k| {
                let t = diftype(k);
                (t.size, !t.is_by_ref())
            }))
        };
        let mut max_tuple = 0;
        let mut max_dvar = 0;
        let vars = self.globals.vars.values().filter(|v| v.array);
        for v in vars.chain(self.tls.vars.values()) {
            if let Some(keys) = &v.keys {
                max_tuple = max_tuple.max(tuple(keys));
            }
            if let Some(t) = v.ty {
                max_dvar = max_dvar.max(diftype(t).size);
            }
        }
        for a in self.aggs.iter().filter(|a| self.aggs_used.contains(&a.id)) {
            if let Some(keys) = &a.keys {
                max_tuple = max_tuple.max(tuple(keys));
            }
        }
        (max_tuple, max_dvar)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_fields_right_align() {
        let d = probe_desc("BEGIN", 1).unwrap();
        assert_eq!((d.provider.as_str(), d.name.as_str()), ("", "BEGIN"));
        let d = probe_desc("syscall::read:entry", 1).unwrap();
        assert_eq!(d.provider, "syscall");
        assert_eq!(d.module, "");
        assert_eq!(d.function, "read");
        assert_eq!(d.name, "entry");
        let d = probe_desc("read:entry", 1).unwrap();
        assert_eq!((d.function.as_str(), d.name.as_str()), ("read", "entry"));
        assert_eq!(
            probe_desc("a:b:c:d:e", 1).unwrap_err().tag,
            ErrTag::D_PDESC_INVAL
        );
    }
}
