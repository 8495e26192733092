//! Subroutine numbers for `call` (spec Tables 10.1-10.2, with the errata of `shared/spec/INDEX.md`).

macro_rules! subrs {
    ($($name:ident = $num:expr, $d:expr;)*) => {
        /// A DIF subroutine.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[repr(u16)]
        pub enum Subr { $($name = $num,)* }

        impl Subr {
            /// Every subroutine, in numeric order.
            pub const ALL: &'static [Subr] = &[$(Subr::$name,)*];

            /// The subroutine with this number, if any.
            pub fn from_u16(n: u16) -> Option<Subr> {
                match n { $($num => Some(Subr::$name),)* _ => None }
            }

            /// Its D name.
            pub fn name(self) -> &'static str {
                match self { $(Subr::$name => $d,)* }
            }

            /// The subroutine with this D name, if any.
            pub fn from_name(s: &str) -> Option<Subr> {
                match s { $($d => Some(Subr::$name),)* _ => None }
            }
        }
    };
}

impl Subr {
    /// Whether the subroutine writes into the traced process's memory (`copyout`,
    /// `copyoutstr`): a program calling it is destructive (it needs `-w`).
    pub fn is_destructive(self) -> bool {
        matches!(self, Subr::Copyout | Subr::Copyoutstr)
    }
}

subrs! {
    Rand = 0, "rand";
    MutexOwned = 1, "mutex_owned";
    MutexOwner = 2, "mutex_owner";
    MutexTypeAdaptive = 3, "mutex_type_adaptive";
    MutexTypeSpin = 4, "mutex_type_spin";
    RwReadHeld = 5, "rw_read_held";
    RwWriteHeld = 6, "rw_write_held";
    RwIswriter = 7, "rw_iswriter";
    Copyin = 8, "copyin";
    Copyinstr = 9, "copyinstr";
    Speculation = 10, "speculation";
    Progenyof = 11, "progenyof";
    Strlen = 12, "strlen";
    Copyout = 13, "copyout";
    Copyoutstr = 14, "copyoutstr";
    Alloca = 15, "alloca";
    Bcopy = 16, "bcopy";
    Copyinto = 17, "copyinto";
    Msgdsize = 18, "msgdsize";
    Msgsize = 19, "msgsize";
    Getmajor = 20, "getmajor";
    Getminor = 21, "getminor";
    DdiPathname = 22, "ddi_pathname";
    Strjoin = 23, "strjoin";
    Lltostr = 24, "lltostr";
    Basename = 25, "basename";
    Dirname = 26, "dirname";
    Cleanpath = 27, "cleanpath";
    Strchr = 28, "strchr";
    Strrchr = 29, "strrchr";
    Strstr = 30, "strstr";
    Strtok = 31, "strtok";
    Substr = 32, "substr";
    Index = 33, "index";
    Rindex = 34, "rindex";
    Htons = 35, "htons";
    Htonl = 36, "htonl";
    Htonll = 37, "htonll";
    Ntohs = 38, "ntohs";
    Ntohl = 39, "ntohl";
    Ntohll = 40, "ntohll";
    InetNtop = 41, "inet_ntop";
    InetNtoa = 42, "inet_ntoa";
    InetNtoa6 = 43, "inet_ntoa6";
    Toupper = 44, "toupper";
    Tolower = 45, "tolower";
    Memref = 46, "memref";
    SxSharedHeld = 48, "sx_shared_held";
    SxExclusiveHeld = 49, "sx_exclusive_held";
    SxIsexclusive = 50, "sx_isexclusive";
    Memstr = 51, "memstr";
    Getf = 52, "getf";
    Json = 53, "json";
    Strtoll = 54, "strtoll";
    Random = 55, "random";
    Uuidstr = 56, "uuidstr";
    CopyoutMbuf = 57, "copyoutmbuf";
    // DTrace for Linux (Oracle) numbers d_path 44, which illumos gives toupper: we keep illumos'
    // numbers and give d_path the next number free of our own.
    DPath = 58, "d_path";
    // DTrace for Linux's link_ntop (its 45, illumos' tolower) takes the next number free.
    LinkNtop = 59, "link_ntop";
    // Not callable from D: the compiler's run-time check of an index into an array variable
    // declared with a size (`int a[5]; ... a[i]`), DTrace for Linux's "index out of bounds".
    Bounds = 60, "%bounds";
}
