//! Address expressions: an address computed from a probe argument, the current thread or a
//! provider's context record through constant offsets, kernel pointer loads, user pointer loads
//! and an index by a probe argument (`curthread->real_parent->pid`, `args[0]->field`,
//! `curthread->files->fdt->fd[arg0]`). The data-flow walk ([`super::Visitor`]) builds them; a provider
//! evaluates them at the probe.

/// Where an address starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AddrBase {
    /// The value of probe argument `n` (as captured).
    Arg(usize),
    /// The address of byte `offset` of the probe's context record (tracepoint inline arrays).
    Context(u16),
    /// A `__data_loc` field at `offset` of a tracepoint record: the address of the bytes it points at.
    DataLoc(u16),
    /// The current task (`curthread`): with `offset` and `derefs` this reaches any
    /// `curthread->a->b` chain, using member offsets from the kernel's BTF.
    CurrentTask,
    /// The address a D thread-local variable (`self->buf`, by variable id) holds for the current
    /// thread, as the eBPF of the probe that stored it saved in the thread-variable mirror map
    /// (the Linux provider's `MirrorOp`). No entry: the copy is not made (it reads as a fault, so
    /// the read goes to the process at delivery).
    ThreadVar(u32),
}

/// An address computable at the probe: `base + offset`, then for each entry `d` of `derefs`, the
/// kernel pointer stored at the current address plus `d` (so `args[0]->a->b` is
/// `Arg(0)`, offset of `a`, derefs `[offset of b]`), then for each entry `d` of `user_derefs`, the
/// user pointer stored at the current (user) address plus `d` (execve's `argv[1]`, read from the
/// argument vector the probe copies: `Arg(1)`, offset 8, user derefs `[0]`); with an array index
/// by a probe argument added at one kernel step when `index` says so
/// (`curthread->files->fdt->fd[arg0]`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct AddrExpr {
    /// Start.
    pub base: AddrBase,
    /// Added to the base.
    pub offset: i32,
    /// Pointer hops, each followed by adding its offset.
    pub derefs: Vec<i32>,
    /// User pointer hops after the kernel ones, each followed by adding its offset.
    pub user_derefs: Vec<i32>,
    /// An index by a probe argument, if any.
    pub index: Option<ArgIndex>,
}

/// `argN * scale` (`argN` first sign-extended from 32 bits when `sext32`), added to an address after
/// its first `hop` pointer hops (0: to `base + offset`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ArgIndex {
    /// Hops made before it is added.
    pub hop: u8,
    /// The argument.
    pub arg: u8,
    /// Bytes per element.
    pub scale: i32,
    /// The argument is an `int`: only its low 32 bits count, sign-extended.
    pub sext32: bool,
}

impl AddrExpr {
    /// The value of argument `n`, unchanged.
    pub fn arg(n: usize) -> Self {
        AddrExpr {
            base: AddrBase::Arg(n),
            offset: 0,
            derefs: Vec::new(),
            user_derefs: Vec::new(),
            index: None,
        }
    }

    /// `base + offset` then the kernel pointer hops `derefs` (no user hops).
    pub fn kernel(base: AddrBase, offset: i32, derefs: Vec<i32>) -> Self {
        AddrExpr {
            base,
            offset,
            derefs,
            user_derefs: Vec::new(),
            index: None,
        }
    }

    /// `self + c`: the offset added after the last hop; `None` when it no longer fits 32 bits.
    pub fn offset_by(&self, c: i64) -> Option<AddrExpr> {
        let mut e = self.clone();
        let slot = match (e.user_derefs.last_mut(), e.derefs.last_mut()) {
            (Some(d), _) | (None, Some(d)) => d,
            (None, None) => &mut e.offset,
        };
        *slot = i32::try_from(i64::from(*slot).wrapping_add(c)).ok()?;
        Some(e)
    }

    /// Whether it is probe argument `n`'s value itself: no offset, hop or index.
    pub fn plain_arg(&self) -> Option<usize> {
        match self {
            AddrExpr {
                base: AddrBase::Arg(a),
                offset: 0,
                derefs,
                user_derefs,
                index: None,
            } if derefs.is_empty() && user_derefs.is_empty() => Some(*a),
            _ => None,
        }
    }
}
