//! The byte-order subroutines in translated code, as the interpreter's: `htons(x)`/`ntohs(x)`
//! give the low 16 bits of `x` in network (big-endian) order, `htonl`/`ntohl` the low 32 bits,
//! `htonll`/`ntohll` all 64, each zero-extended. One eBPF `BPF_END | BPF_TO_BE` instruction does
//! it: on x86-64 (little-endian) a byte swap that also clears the bits above its width.

use super::{State, Translator, Untranslatable};
use crate::insn::{Size, R1, R10};
use dtrace_dif::subr::Subr;

impl Translator<'_> {
    /// `which` (one of the `hton*`/`ntoh*` family) of the integer on the tuple stack into `rd`.
    pub(super) fn byteorder(
        &mut self,
        pc: usize,
        s: &mut State,
        which: Subr,
        rd: u8,
    ) -> Result<(), Untranslatable> {
        let bits = match which {
            Subr::Htons | Subr::Ntohs => 16,
            Subr::Htonl | Subr::Ntohl => 32,
            Subr::Htonll | Subr::Ntohll => 64,
            other => {
                return Err(Untranslatable::Invalid {
                    pc,
                    what: format!("{}() is not a byte-order subroutine", other.name()),
                })
            }
        };
        let args = self.int_args(pc, s)?;
        let [x] = args[..] else {
            return Err(Untranslatable::Invalid {
                pc,
                what: format!("{}() with {} arguments", which.name(), args.len()),
            });
        };
        self.a.load(Size::DW, R1, R10, x).to_be(R1, bits);
        self.put(s, rd, R1, super::Kind::Int(None));
        Ok(())
    }
}
