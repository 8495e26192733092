//! `if`/`else` in clause bodies, compiled as DTrace does: the clause is split into several clauses
//! for the same probes, each guarded by a predicate on clause-local variables (`this->%g`, the
//! original predicate; `this->%cN`, each condition) that hold their values for the probe firing.
//!
//! `P /pred/ { s1; if (c) { s2 } else { s3 } s4 }` becomes
//! `P { this->%g1 = pred; }`, `P /this->%g1/ { s1; this->%c2 = c; }`,
//! `P /this->%g1 && this->%c2/ { s2 }`, `P /this->%g1 && !this->%c2/ { s3 }`, `P /this->%g1/ { s4 }`.

use crate::ast::{BinOp, Clause, Expr, ExprKind, Stmt, UnOp, VarScope};

fn has_if(s: &[Stmt]) -> bool {
    s.iter().any(|s| matches!(s, Stmt::If(..)))
}

fn local(name: &str, line: u32) -> Expr {
    Expr {
        kind: ExprKind::ScopedVar(VarScope::Local, name.to_string()),
        line,
    }
}

fn assign(name: &str, e: Expr) -> Stmt {
    let line = e.line;
    Stmt::Expr(Expr {
        kind: ExprKind::Assign(None, Box::new(local(name, line)), Box::new(e)),
        line,
    })
}

fn and(a: Option<Expr>, b: Expr) -> Expr {
    match a {
        None => b,
        Some(a) => {
            let line = b.line;
            Expr {
                kind: ExprKind::Binary(BinOp::LogAnd, Box::new(a), Box::new(b)),
                line,
            }
        }
    }
}

struct Splitter<'a> {
    probes: &'a [(String, u32)],
    out: Vec<Clause>,
    next: u32,
}

impl Splitter<'_> {
    fn fresh(&mut self, p: &str) -> String {
        self.next += 1;
        format!("%{p}{}", self.next)
    }

    fn flush(&mut self, seg: &mut Vec<Stmt>, cond: &Option<Expr>, line: u32) {
        if seg.is_empty() {
            return;
        }
        self.out.push(Clause {
            probes: self.probes.to_vec(),
            pred: cond.clone(),
            body: Some(std::mem::take(seg)),
            line,
        });
    }

    fn emit(&mut self, stmts: &[Stmt], cond: Option<Expr>, line: u32) {
        let mut seg = Vec::new();
        for s in stmts {
            match s {
                Stmt::Expr(_) => seg.push(s.clone()),
                Stmt::If(c, then, els, l) => {
                    let v = self.fresh("c");
                    seg.push(assign(&v, c.clone()));
                    self.flush(&mut seg, &cond, *l);
                    self.emit(then, Some(and(cond.clone(), local(&v, *l))), *l);
                    if !els.is_empty() {
                        let not = Expr {
                            kind: ExprKind::Unary(UnOp::LogNot, Box::new(local(&v, *l))),
                            line: *l,
                        };
                        self.emit(els, Some(and(cond.clone(), not)), *l);
                    }
                }
            }
        }
        self.flush(&mut seg, &cond, line);
    }
}

/// Splits a clause whose body has `if` statements; other clauses are returned unchanged.
pub fn split(c: &Clause, counter: &mut u32) -> Vec<Clause> {
    let body = match &c.body {
        Some(b) if has_if(b) => b,
        _ => return vec![c.clone()],
    };
    let mut s = Splitter {
        probes: &c.probes,
        out: Vec::new(),
        next: *counter,
    };
    let cond = match &c.pred {
        Some(p) => {
            let g = s.fresh("g");
            s.out.push(Clause {
                probes: c.probes.clone(),
                pred: None,
                body: Some(vec![assign(&g, p.clone())]),
                line: c.line,
            });
            Some(local(&g, p.line))
        }
        None => None,
    };
    s.emit(body, cond, c.line);
    *counter = s.next;
    s.out
}
