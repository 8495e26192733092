//! DIF data-flow: what the registers of a DIF object hold at each instruction, found in one
//! forward pass ([`walk`]) over an abstract [`Value`] lattice (constants, probe arguments,
//! `curthread`, [`AddrExpr`] address expressions built by constant offsets and pointer loads, an
//! index by an argument, lengths limited by a constant), joined where branches meet. An analysis
//! supplies a [`Visitor`] that records what it looks for; the Linux provider's capture planner
//! (what memory a clause reads at its probe) is one.

mod addr;
mod value;
mod walk;

pub use addr::{AddrBase, AddrExpr, ArgIndex};
pub use value::{fold, kernel_load_size, Value};
pub use walk::{walk, Limits, State, Visitor, NREGS};

#[cfg(test)]
mod tests;
