//! DIF opcodes (spec Tables 8.1-8.4, with the errata of `shared/spec/INDEX.md`) and their encoding formats.

/// How an instruction word is laid out around its 8-bit opcode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `op r1 r2 rd`, 8 bits each (arrays by index use `op var r2 rd`).
    R,
    /// `op label24`.
    B,
    /// `op idx16 rd|rs`.
    W,
}

macro_rules! opcodes {
    ($($name:ident = $num:expr, $mn:expr, $fmt:ident;)*) => {
        /// A DIF opcode.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[repr(u8)]
        pub enum Opcode { $($name = $num,)* }

        impl Opcode {
            /// Every opcode, in numeric order.
            pub const ALL: &'static [Opcode] = &[$(Opcode::$name,)*];

            /// The opcode with this number, if there is one.
            pub fn from_u8(n: u8) -> Option<Opcode> {
                match n { $($num => Some(Opcode::$name),)* _ => None }
            }

            /// The lower-case mnemonic used by the assembler and disassembler.
            pub fn mnemonic(self) -> &'static str {
                match self { $(Opcode::$name => $mn,)* }
            }

            /// The opcode for a lower-case mnemonic.
            pub fn from_mnemonic(s: &str) -> Option<Opcode> {
                match s { $($mn => Some(Opcode::$name),)* _ => None }
            }

            /// The encoding format of this opcode's instructions.
            pub fn format(self) -> Format {
                match self { $(Opcode::$name => Format::$fmt,)* }
            }
        }
    };
}

opcodes! {
    Or = 1, "or", R;
    Xor = 2, "xor", R;
    And = 3, "and", R;
    Sll = 4, "sll", R;
    Srl = 5, "srl", R;
    Sub = 6, "sub", R;
    Add = 7, "add", R;
    Mul = 8, "mul", R;
    Sdiv = 9, "sdiv", R;
    Udiv = 10, "udiv", R;
    Srem = 11, "srem", R;
    Urem = 12, "urem", R;
    Not = 13, "not", R;
    Mov = 14, "mov", R;
    Cmp = 15, "cmp", R;
    Tst = 16, "tst", R;
    Ba = 17, "ba", B;
    Be = 18, "be", B;
    Bne = 19, "bne", B;
    Bg = 20, "bg", B;
    Bgu = 21, "bgu", B;
    Bge = 22, "bge", B;
    Bgeu = 23, "bgeu", B;
    Bl = 24, "bl", B;
    Blu = 25, "blu", B;
    Ble = 26, "ble", B;
    Bleu = 27, "bleu", B;
    Ldsb = 28, "ldsb", R;
    Ldsh = 29, "ldsh", R;
    Ldsw = 30, "ldsw", R;
    Ldub = 31, "ldub", R;
    Lduh = 32, "lduh", R;
    Lduw = 33, "lduw", R;
    Ldx = 34, "ldx", R;
    Ret = 35, "ret", R;
    Nop = 36, "nop", R;
    Setx = 37, "setx", W;
    Sets = 38, "sets", W;
    Scmp = 39, "scmp", R;
    Ldga = 40, "ldga", R;
    Ldgs = 41, "ldgs", W;
    Stgs = 42, "stgs", W;
    Ldta = 43, "ldta", R;
    Ldts = 44, "ldts", W;
    Stts = 45, "stts", W;
    Sra = 46, "sra", R;
    Call = 47, "call", W;
    Pushtr = 48, "pushtr", R;
    Pushtv = 49, "pushtv", R;
    Popts = 50, "popts", R;
    Flushts = 51, "flushts", R;
    Ldgaa = 52, "ldgaa", W;
    Ldtaa = 53, "ldtaa", W;
    Stgaa = 54, "stgaa", W;
    Sttaa = 55, "sttaa", W;
    Ldls = 56, "ldls", W;
    Stls = 57, "stls", W;
    Allocs = 58, "allocs", R;
    Copys = 59, "copys", R;
    Stb = 60, "stb", R;
    Sth = 61, "sth", R;
    Stw = 62, "stw", R;
    Stx = 63, "stx", R;
    Uldsb = 64, "uldsb", R;
    Uldsh = 65, "uldsh", R;
    Uldsw = 66, "uldsw", R;
    Uldub = 67, "uldub", R;
    Ulduh = 68, "ulduh", R;
    Ulduw = 69, "ulduw", R;
    Uldx = 70, "uldx", R;
    Rldsb = 71, "rldsb", R;
    Rldsh = 72, "rldsh", R;
    Rldsw = 73, "rldsw", R;
    Rldub = 74, "rldub", R;
    Rlduh = 75, "rlduh", R;
    Rlduw = 76, "rlduw", R;
    Rldx = 77, "rldx", R;
    Xlate = 78, "xlate", W;
    Xlarg = 79, "xlarg", W;
}
