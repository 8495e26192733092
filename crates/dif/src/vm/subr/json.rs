//! `json(document, selector)`, as DTrace's `dtrace_json()` defines it: the selector is a list of
//! elements separated by `.`, each a member name or an array index (`0`, or `[0]` written after an
//! element); the value found is returned as written in the document: strings without their quotes
//! (escapes kept), numbers, `true`, `false` and `null` as written, objects and arrays as their whole
//! text. The document is checked only as far as it is read: malformed JSON before the value (a bad
//! number such as `0x10`, a bad escape such as `\u00AZ`), a missing member or index, or selecting into a
//! scalar yields `None` (D's NULL string).

/// Selector steps.
enum Step<'a> {
    /// A member name, or an array index written as a bare element (`a.0`).
    Name(&'a [u8]),
    /// An index written in brackets (`a[0]`).
    Index(usize),
}

fn parse_selector(sel: &[u8]) -> Option<Vec<Step<'_>>> {
    let mut steps = Vec::new();
    let mut i = 0;
    while i < sel.len() {
        if sel[i] == b'[' {
            let end = i + sel[i..].iter().position(|&c| c == b']')?;
            let n = std::str::from_utf8(&sel[i + 1..end]).ok()?.parse().ok()?;
            steps.push(Step::Index(n));
            i = end + 1;
            if i < sel.len() && sel[i] == b'.' {
                i += 1;
            }
            continue;
        }
        let start = i;
        while i < sel.len() && sel[i] != b'.' && sel[i] != b'[' {
            i += 1;
        }
        steps.push(Step::Name(&sel[start..i]));
        if i < sel.len() && sel[i] == b'.' {
            i += 1;
        }
    }
    Some(steps)
}

/// An array index written as a bare selector element: decimal digits only.
fn bare_index(name: &[u8]) -> Option<usize> {
    if name.is_empty() || !name.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(name).ok()?.parse().ok()
}

struct P<'a> {
    s: &'a [u8],
    i: usize,
}

const MAX_DEPTH: usize = 128;

impl P<'_> {
    fn ws(&mut self) {
        while self.i < self.s.len() && matches!(self.s[self.i], b' ' | b'\t' | b'\n' | b'\r') {
            self.i += 1;
        }
    }
    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }
    fn eat(&mut self, c: u8) -> Option<()> {
        self.ws();
        (self.peek()? == c).then(|| self.i += 1)
    }
    /// Reads a string with valid escapes; returns its contents (escapes kept).
    fn string(&mut self) -> Option<(usize, usize)> {
        self.ws();
        if self.peek()? != b'"' {
            return None;
        }
        self.i += 1;
        let start = self.i;
        loop {
            match self.peek()? {
                b'"' => {
                    self.i += 1;
                    return Some((start, self.i - 1));
                }
                b'\\' => {
                    self.i += 1;
                    match self.peek()? {
                        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => self.i += 1,
                        b'u' => {
                            let hex = self.s.get(self.i + 1..self.i + 5)?;
                            if !hex.iter().all(u8::is_ascii_hexdigit) {
                                return None;
                            }
                            self.i += 5;
                        }
                        _ => return None,
                    }
                }
                c if c < 0x20 => return None,
                _ => self.i += 1,
            }
        }
    }
    fn digits(&mut self) -> usize {
        let start = self.i;
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.i += 1;
        }
        self.i - start
    }
    /// A JSON number: `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`.
    fn number(&mut self) -> Option<()> {
        if self.peek() == Some(b'-') {
            self.i += 1;
        }
        match self.peek()? {
            b'0' => self.i += 1,
            b'1'..=b'9' => {
                self.digits();
            }
            _ => return None,
        }
        if self.peek() == Some(b'.') {
            self.i += 1;
            if self.digits() == 0 {
                return None;
            }
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.i += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.i += 1;
            }
            if self.digits() == 0 {
                return None;
            }
        }
        // A number ends at a delimiter.
        match self.peek() {
            None | Some(b',' | b']' | b'}' | b' ' | b'\t' | b'\n' | b'\r') => Some(()),
            _ => None,
        }
    }
    /// Reads any value; returns its span: a string's contents, or the whole text of anything else.
    fn value(&mut self, depth: usize) -> Option<(usize, usize)> {
        if depth > MAX_DEPTH {
            return None;
        }
        self.ws();
        let start = self.i;
        match self.peek()? {
            b'"' => return self.string(),
            b'{' => {
                self.i += 1;
                if self.eat(b'}').is_none() {
                    loop {
                        self.string()?;
                        self.eat(b':')?;
                        self.value(depth + 1)?;
                        if self.eat(b',').is_none() {
                            self.eat(b'}')?;
                            break;
                        }
                    }
                }
            }
            b'[' => {
                self.i += 1;
                if self.eat(b']').is_none() {
                    loop {
                        self.value(depth + 1)?;
                        if self.eat(b',').is_none() {
                            self.eat(b']')?;
                            break;
                        }
                    }
                }
            }
            b't' | b'f' | b'n' => {
                let rest = &self.s[self.i..];
                let lit: &[u8] = [&b"true"[..], b"false", b"null"]
                    .into_iter()
                    .find(|l| rest.starts_with(l))?;
                self.i += lit.len();
            }
            _ => self.number()?,
        }
        Some((start, self.i))
    }

    /// Finds the value the steps select, starting at the current position.
    fn select(&mut self, steps: &[Step<'_>], depth: usize) -> Option<(usize, usize)> {
        let Some((first, rest)) = steps.split_first() else {
            return self.value(depth);
        };
        if depth > MAX_DEPTH {
            return None;
        }
        self.ws();
        match (self.peek()?, first) {
            (b'{', Step::Name(k)) => {
                self.i += 1;
                if self.eat(b'}').is_some() {
                    return None;
                }
                loop {
                    let (a, b) = self.string()?;
                    self.eat(b':')?;
                    if &self.s[a..b] == *k {
                        return self.select(rest, depth + 1);
                    }
                    self.value(depth + 1)?;
                    self.eat(b',')?;
                }
            }
            (b'[', step) => {
                let n = match step {
                    Step::Index(n) => *n,
                    Step::Name(k) => bare_index(k)?,
                };
                self.i += 1;
                if self.eat(b']').is_some() {
                    return None;
                }
                let mut k = 0;
                loop {
                    if k == n {
                        return self.select(rest, depth + 1);
                    }
                    self.value(depth + 1)?;
                    self.eat(b',')?;
                    k += 1;
                }
            }
            _ => None,
        }
    }
}

/// The value of `doc` the selector names, as text (see the module documentation).
pub fn json(doc: &[u8], selector: &[u8]) -> Option<Vec<u8>> {
    let steps = parse_selector(selector)?;
    if steps.len() > MAX_DEPTH {
        return None;
    }
    let mut p = P { s: doc, i: 0 };
    let (a, b) = p.select(&steps, 0)?;
    Some(doc[a..b].to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn j(d: &str, s: &str) -> Option<String> {
        json(d.as_bytes(), s.as_bytes()).map(|v| String::from_utf8(v).unwrap())
    }

    #[test]
    fn selects_scalars() {
        let d = r#" {"a": 1, "b": {"c": "x\"y", "d": [true, null, -2.5e3, {"e": "f"}]}} "#;
        assert_eq!(j(d, "a").as_deref(), Some("1"));
        assert_eq!(j(d, "b.c").as_deref(), Some("x\\\"y"));
        assert_eq!(j(d, "b.d[0]").as_deref(), Some("true"));
        assert_eq!(j(d, "b.d[1]").as_deref(), Some("null"));
        assert_eq!(j(d, "b.d[2]").as_deref(), Some("-2.5e3"));
        assert_eq!(j(d, "b.d[3].e").as_deref(), Some("f"));
        assert_eq!(j(d, "b.d.3.e").as_deref(), Some("f"));
        assert_eq!(j(d, "b.d[4]"), None);
        assert_eq!(j(d, "zz"), None);
        assert_eq!(j("[1,2]", "[1]").as_deref(), Some("2"));
        assert_eq!(j("{\"a\":", "a"), None);
        assert_eq!(j("", "a"), None);
        assert_eq!(j(&"[".repeat(1000), "a"), None);
        assert_eq!(j(&"[".repeat(1000), &"0.".repeat(1000)), None);
        assert_eq!(j("{\"a\":{}}", "a.b"), None);
        assert_eq!(j("{}", &"a.".repeat(100_000)), None);
    }

    /// DTrace's documented behaviour (illumos `json/tst.general.d`).
    #[test]
    fn follows_dtrace_for_arrays_objects_and_errors() {
        assert_eq!(j("[]", "0"), None);
        assert_eq!(j("[1]", "0").as_deref(), Some("1"));
        for s in ["1", "100", "-1"] {
            assert_eq!(j("[1]", s), None);
        }
        assert_eq!(j("[0x1000]", "0"), None);
        assert_eq!(j("[1.5001]", "0").as_deref(), Some("1.5001"));
        assert_eq!(j("[ \t    \t 16E10  \t ]", "0").as_deref(), Some("16E10"));
        assert_eq!(j("[\"alpha\"]", "0").as_deref(), Some("alpha"));
        assert_eq!(j("[1,5,10,15,20]", "[3]").as_deref(), Some("15"));
        assert_eq!(j("[1,5,10,15,20]", "[5]"), None);
        let o = "[ { \"first\": true, \"second\": false }]";
        assert_eq!(j(o, "0.second").as_deref(), Some("false"));
        assert_eq!(j(o, "0.third"), None);
        let m = "\n[\t\"string\" ,\t32 , true\t,\t {\"a\":  9,\t\"b\": false},\t\t100.3e10, false, 200.5,{\"key\" \t:\n \"val\"},\t\t null ]\t\t";
        assert_eq!(j(m, "0").as_deref(), Some("string"));
        assert_eq!(j(m, "0.notobject"), None);
        assert_eq!(j(m, "3").as_deref(), Some("{\"a\":  9,\t\"b\": false}"));
        assert_eq!(j(m, "3.b").as_deref(), Some("false"));
        assert_eq!(j(m, "4").as_deref(), Some("100.3e10"));
        assert_eq!(j(m, "7").as_deref(), Some("{\"key\" \t:\n \"val\"}"));
        assert_eq!(j(m, "7.key").as_deref(), Some("val"));
        assert_eq!(j(m, "7.key.notobject"), None);
        assert_eq!(j(m, "8").as_deref(), Some("null"));
        assert_eq!(j(m, "9"), None);
        let e = "[\"abcd \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\u0000 \\uf00F \", \"final\"]";
        assert_eq!(
            j(e, "0").as_deref(),
            Some("abcd \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\u0000 \\uf00F ")
        );
        assert_eq!(j(e, "1").as_deref(), Some("final"));
        let b = "[\"fine here\", \"dodgey \\u00AZ\", \"wont get here\"]";
        assert_eq!(j(b, "0").as_deref(), Some("fine here"));
        assert_eq!(j(b, "1"), None);
        assert_eq!(j(b, "2"), None);
        let n = "{ \"top\": { \"mid\"  : { \"legs\": \"feet\" }, \"number\": 9, \"array\":[0,1,{\"a\":true,\"bb\":[1,2,false,{\"x\":\"yz\"}]}]}}";
        assert_eq!(
            j(n, "top").as_deref(),
            Some("{ \"mid\"  : { \"legs\": \"feet\" }, \"number\": 9, \"array\":[0,1,{\"a\":true,\"bb\":[1,2,false,{\"x\":\"yz\"}]}]}")
        );
        assert_eq!(j(n, "top.mid").as_deref(), Some("{ \"legs\": \"feet\" }"));
        assert_eq!(j(n, "top.mid.number"), None);
        assert_eq!(
            j(n, "top.array[2].bb").as_deref(),
            Some("[1,2,false,{\"x\":\"yz\"}]")
        );
        assert_eq!(j(n, "top.array[2].bb[3].x").as_deref(), Some("yz"));
        assert_eq!(j(n, "top.array[2].bb[3].x.nofurther"), None);
        assert_eq!(j(n, "top.array[3]"), None);
    }
}
