//! The D abstract syntax tree the parser produces: program items (clauses, declarations, inlines,
//! translators, pragmas), statements, expressions and C type names.

use crate::lexer::IntSuffix;

/// Unary operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnOp {
    /// `-e`
    Neg,
    /// `+e`
    Pos,
    /// `~e`
    BitNot,
    /// `!e`
    LogNot,
    /// `*e`
    Deref,
    /// `&e`
    AddrOf,
    /// `++e`
    PreInc,
    /// `--e`
    PreDec,
    /// `e++`
    PostInc,
    /// `e--`
    PostDec,
}

impl UnOp {
    /// The operator as DTrace names it in messages.
    pub fn text(self) -> &'static str {
        match self {
            UnOp::Neg => "-",
            UnOp::Pos => "+",
            UnOp::BitNot => "~",
            UnOp::LogNot => "!",
            UnOp::Deref => "*",
            UnOp::AddrOf => "&",
            UnOp::PreInc | UnOp::PostInc => "++",
            UnOp::PreDec | UnOp::PostDec => "--",
        }
    }
}

/// Binary operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinOp {
    Mul,
    Div,
    Mod,
    Add,
    Sub,
    Shl,
    Shr,
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
    BitAnd,
    BitXor,
    BitOr,
    LogAnd,
    LogXor,
    LogOr,
}

impl BinOp {
    /// The operator text.
    pub fn text(self) -> &'static str {
        use BinOp::*;
        match self {
            Mul => "*",
            Div => "/",
            Mod => "%",
            Add => "+",
            Sub => "-",
            Shl => "<<",
            Shr => ">>",
            Lt => "<",
            Le => "<=",
            Gt => ">",
            Ge => ">=",
            Eq => "==",
            Ne => "!=",
            BitAnd => "&",
            BitXor => "^",
            BitOr => "|",
            LogAnd => "&&",
            LogXor => "^^",
            LogOr => "||",
        }
    }
}

/// An expression with the line it was parsed on.
#[derive(Debug, Clone, PartialEq)]
pub struct Expr {
    /// What it is.
    pub kind: ExprKind,
    /// Source line.
    pub line: u32,
}

/// Expression forms.
#[derive(Debug, Clone, PartialEq)]
pub enum ExprKind {
    Int(u64, IntSuffix),
    Char(i64),
    Float(f64),
    Str(Vec<u8>),
    /// An identifier (possibly ``mod`sym``).
    Ident(String),
    /// `@name` (name without `@`).
    Agg(String),
    /// `self->name` / `this->name`.
    ScopedVar(VarScope, String),
    Unary(UnOp, Box<Expr>),
    Binary(BinOp, Box<Expr>, Box<Expr>),
    /// `l = r` (`None`) or `l op= r`.
    Assign(Option<BinOp>, Box<Expr>, Box<Expr>),
    Cond(Box<Expr>, Box<Expr>, Box<Expr>),
    /// `name(args)`.
    Call(String, Vec<Expr>),
    /// `e[args]`.
    Index(Box<Expr>, Vec<Expr>),
    /// `e.m` (`false`) or `e->m` (`true`).
    Member(Box<Expr>, String, bool),
    Cast(Box<TypeName>, Box<Expr>),
    SizeofType(Box<TypeName>),
    SizeofExpr(Box<Expr>),
    Stringof(Box<Expr>),
    Offsetof(Box<TypeName>, String),
    Xlate(Box<TypeName>, Box<Expr>),
    Comma(Box<Expr>, Box<Expr>),
}

/// Variable scopes for declarations and `self->`/`this->`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum VarScope {
    Global,
    Thread,
    Local,
}

/// A statement in a clause body.
#[derive(Debug, Clone, PartialEq)]
pub enum Stmt {
    Expr(Expr),
    If(Expr, Vec<Stmt>, Vec<Stmt>, u32),
}

/// Struct, union or enum.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SouKind {
    Struct,
    Union,
}

/// One member declaration of a struct or union.
#[derive(Debug, Clone, PartialEq)]
pub struct MemberDecl {
    pub spec: DeclSpec,
    pub decl: Declarator,
    pub bits: Option<Expr>,
    pub line: u32,
}

/// The base type named by declaration specifiers.
#[derive(Debug, Clone, PartialEq)]
pub enum BaseType {
    /// A built-in or typedef name (`unsigned long` normalized to one name), or `string`.
    Named(String),
    /// `struct/union tag { members }`; `members` is `None` for a reference or forward declaration.
    Sou(SouKind, Option<String>, Option<Vec<MemberDecl>>),
    /// `enum tag { A = 1, B }`.
    Enum(Option<String>, Option<Vec<(String, Option<Expr>, u32)>>),
}

/// Storage class words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StorageClass {
    Typedef,
    Extern,
    Static,
    Register,
    Auto,
    SelfVar,
    ThisVar,
}

/// Declaration specifiers.
#[derive(Debug, Clone, PartialEq)]
pub struct DeclSpec {
    pub class: Option<StorageClass>,
    pub base: BaseType,
    pub line: u32,
}

/// One step of a declarator, applied to the type built so far.
#[derive(Debug, Clone, PartialEq)]
pub enum Derived {
    Pointer,
    /// `[n]` or `[]`.
    Array(Option<Expr>),
    /// `[type, type]`: an associative array signature.
    Assoc(Vec<TypeName>),
    /// `(params)`: a function (only prototypes; not callable).
    Function(Vec<TypeName>),
}

/// A declarator: a name (absent in abstract declarators) and derivations, innermost first.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Declarator {
    pub name: Option<String>,
    pub derived: Vec<Derived>,
}

/// A type name (`unsigned long *`, `struct foo`).
#[derive(Debug, Clone, PartialEq)]
pub struct TypeName {
    pub spec: DeclSpec,
    pub decl: Declarator,
}

/// A `provider` declaration (USDT, for `dtrace -h` and `-G`).
#[derive(Debug, Clone, PartialEq)]
pub struct ProviderDeclAst {
    pub name: String,
    pub probes: Vec<ProbeDeclAst>,
    pub line: u32,
}

/// One `probe name(native) : (translated);` of a provider declaration.
#[derive(Debug, Clone, PartialEq)]
pub struct ProbeDeclAst {
    /// The name as written (`query__start`).
    pub name: String,
    pub native: Vec<TypeName>,
    /// The translated parameter types after `:`, if given.
    pub xlated: Option<Vec<TypeName>>,
    pub line: u32,
}

/// A probe clause.
#[derive(Debug, Clone, PartialEq)]
pub struct Clause {
    /// Probe specifiers with their lines (macro variables already substituted).
    pub probes: Vec<(String, u32)>,
    pub pred: Option<Expr>,
    /// `None` when no `{ }` was given (`dtrace -n BEGIN`).
    pub body: Option<Vec<Stmt>>,
    pub line: u32,
}

/// A member conversion of a translator: `name = expr;`.
#[derive(Debug, Clone, PartialEq)]
pub struct XlatorMember {
    pub name: String,
    pub expr: Expr,
    pub line: u32,
}

/// A top-level item.
#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    Clause(Clause),
    /// Declarations (`int x;`, `self int y;`, `typedef ...;`, `struct s {...};`).
    Decl(DeclSpec, Vec<(Declarator, u32)>),
    /// `inline type name = expr;`
    Inline(TypeName, Expr, u32),
    /// `translator out < in name > { members };`
    Translator {
        out: TypeName,
        input: TypeName,
        param: String,
        members: Vec<XlatorMember>,
        line: u32,
    },
    /// `#pragma` words after `pragma`.
    Pragma(Vec<String>, u32),
    /// `provider name { probe ... };`
    Provider(ProviderDeclAst),
}

/// A parsed program.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Program {
    pub items: Vec<Item>,
    /// Highest `$n` referenced.
    pub max_macro_arg: usize,
    /// Line count of the source.
    pub last_line: u32,
    /// `defaultargs` was in effect (option or pragma).
    pub default_args: bool,
}
