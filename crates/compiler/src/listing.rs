//! The `dtrace -S` listing: each ECB's predicate and action DIF objects, disassembled by the `dif`
//! crate's disassembler (DTrace's `dt_dis` format). DTrace prints each object's address after
//! `DIFO`; we print a stable label naming the clause and the object instead.

use dtrace_dif::disasm::disassemble;
use dtrace_dif::program::Program;

/// The whole `-S` listing of a program.
pub fn listing(p: &Program) -> String {
    let mut s = String::new();
    for (n, ecb) in p.ecbs.iter().enumerate() {
        if let Some(pr) = &ecb.predicate {
            s.push_str(&disassemble(pr, &format!("ecb{n}/predicate")));
        }
        for (i, a) in ecb.actions.iter().enumerate() {
            if let Some(o) = &a.difo {
                s.push_str(&disassemble(o, &format!("ecb{n}/action{}", i + 1)));
            }
        }
    }
    s
}
