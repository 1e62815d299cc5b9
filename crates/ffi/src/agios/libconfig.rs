//! The subset of libconfig's syntax that AGIOS configuration files use.
//!
//! Settings `name = value;` (or `name : value`, terminated by `;`, `,` or nothing), groups
//! `name = { ... };` (and `name : { ... }`), arrays `[...]` and lists `(...)` (parsed and skipped),
//! scalars: integers (decimal or `0x` hex, optional `L`/`LL` suffix), floats, booleans
//! (`true`/`false`, any case), strings with `\"`, `\\`, `\n`, `\t` escapes and adjacent strings
//! concatenated. Comments: `#`, `//`, `/* */`. `@include` is not supported (an error).
//!
//! Not libconfig itself (a C library AGIOS links): the shim has no C dependency, and only needs the
//! scalars of the `library_options` group. Settings come out flattened as `group.name`.

/// A scalar setting.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// An integer.
    Int(i64),
    /// A floating-point number.
    Float(f64),
    /// A boolean.
    Bool(bool),
    /// A string.
    Str(String),
}

/// A syntax error, with its 1-based line.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct LibconfigError {
    /// The line.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Name(String),
    Scalar(Value),
    Punct(char),
}

fn tokenize(text: &str) -> Result<Vec<(Tok, usize)>, LibconfigError> {
    let b = text.as_bytes();
    let mut i = 0;
    let mut line = 1;
    let mut out = Vec::new();
    let err = |line, message: String| LibconfigError { line, message };
    while i < b.len() {
        let c = b[i];
        match c {
            b'\n' => {
                line += 1;
                i += 1;
            }
            c if c.is_ascii_whitespace() => i += 1,
            b'#' => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                i += 2;
                loop {
                    if i + 1 >= b.len() {
                        return Err(err(line, "unterminated /* comment".into()));
                    }
                    if b[i] == b'\n' {
                        line += 1;
                    }
                    if b[i] == b'*' && b[i + 1] == b'/' {
                        i += 2;
                        break;
                    }
                    i += 1;
                }
            }
            b'"' => {
                let mut s = Vec::new();
                i += 1;
                loop {
                    match b.get(i) {
                        None => return Err(err(line, "unterminated string".into())),
                        Some(b'"') => {
                            i += 1;
                            break;
                        }
                        Some(b'\\') => {
                            let e = b.get(i + 1).copied().unwrap_or(b'\\');
                            s.push(match e {
                                b'n' => b'\n',
                                b't' => b'\t',
                                b'r' => b'\r',
                                b'f' => b'\x0c',
                                other => other,
                            });
                            i += 2;
                        }
                        Some(&ch) => {
                            if ch == b'\n' {
                                line += 1;
                            }
                            s.push(ch);
                            i += 1;
                        }
                    }
                }
                let s = String::from_utf8_lossy(&s).into_owned();
                // Adjacent strings concatenate.
                if let Some((Tok::Scalar(Value::Str(prev)), _)) = out.last_mut() {
                    prev.push_str(&s);
                } else {
                    out.push((Tok::Scalar(Value::Str(s)), line));
                }
            }
            b'=' | b':' | b';' | b',' | b'{' | b'}' | b'[' | b']' | b'(' | b')' => {
                out.push((Tok::Punct(c as char), line));
                i += 1;
            }
            c if c.is_ascii_alphabetic() || c == b'*' => {
                let start = i;
                while i < b.len()
                    && (b[i].is_ascii_alphanumeric() || matches!(b[i], b'_' | b'-' | b'*'))
                {
                    i += 1;
                }
                let word = &text[start..i];
                let tok = match word.to_ascii_lowercase().as_str() {
                    "true" => Tok::Scalar(Value::Bool(true)),
                    "false" => Tok::Scalar(Value::Bool(false)),
                    _ => Tok::Name(word.to_string()),
                };
                out.push((tok, line));
            }
            c if c.is_ascii_digit() || c == b'-' || c == b'+' || c == b'.' => {
                let start = i;
                i += 1;
                while i < b.len()
                    && (b[i].is_ascii_alphanumeric() || matches!(b[i], b'.' | b'-' | b'+'))
                {
                    i += 1;
                }
                let word = &text[start..i];
                out.push((
                    Tok::Scalar(
                        number(word).ok_or_else(|| err(line, format!("bad number {word:?}")))?,
                    ),
                    line,
                ));
            }
            b'@' => return Err(err(line, "@include is not supported".into())),
            other => {
                return Err(err(
                    line,
                    format!("unexpected character {:?}", other as char),
                ))
            }
        }
    }
    Ok(out)
}

fn number(word: &str) -> Option<Value> {
    let trimmed = word
        .strip_suffix("LL")
        .or_else(|| word.strip_suffix('L'))
        .unwrap_or(word);
    let (neg, digits) = match trimmed.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, trimmed.strip_prefix('+').unwrap_or(trimmed)),
    };
    if let Some(hex) = digits
        .strip_prefix("0x")
        .or_else(|| digits.strip_prefix("0X"))
    {
        let v = i64::from_str_radix(hex, 16).ok()?;
        return Some(Value::Int(if neg { -v } else { v }));
    }
    if let Ok(v) = trimmed.parse::<i64>() {
        return Some(Value::Int(v));
    }
    trimmed.parse::<f64>().ok().map(Value::Float)
}

struct Parser {
    toks: Vec<(Tok, usize)>,
    pos: usize,
    out: Vec<(String, Value)>,
}

impl Parser {
    fn line(&self) -> usize {
        self.toks
            .get(self.pos)
            .or(self.toks.last())
            .map_or(1, |t| t.1)
    }

    fn err(&self, message: impl Into<String>) -> LibconfigError {
        LibconfigError {
            line: self.line(),
            message: message.into(),
        }
    }

    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos).map(|t| &t.0)
    }

    fn bump(&mut self) -> Option<Tok> {
        let t = self.toks.get(self.pos).map(|t| t.0.clone());
        self.pos += 1;
        t
    }

    /// Settings until `close` (or the end of input when `close` is None).
    fn settings(&mut self, prefix: &str, close: Option<char>) -> Result<(), LibconfigError> {
        loop {
            match self.peek() {
                None if close.is_none() => return Ok(()),
                None => return Err(self.err("unexpected end of file: missing '}'")),
                Some(Tok::Punct(c)) if Some(*c) == close => {
                    self.pos += 1;
                    return Ok(());
                }
                _ => self.setting(prefix)?,
            }
        }
    }

    fn setting(&mut self, prefix: &str) -> Result<(), LibconfigError> {
        let name = match self.bump() {
            Some(Tok::Name(n)) => n,
            other => return Err(self.err(format!("expected a setting name, found {other:?}"))),
        };
        match self.bump() {
            Some(Tok::Punct('=' | ':')) => {}
            other => {
                return Err(self.err(format!("expected '=' or ':' after {name}, found {other:?}")))
            }
        }
        let path = if prefix.is_empty() {
            name
        } else {
            format!("{prefix}.{name}")
        };
        self.value(&path)?;
        if let Some(Tok::Punct(';' | ',')) = self.peek() {
            self.pos += 1;
        }
        Ok(())
    }

    fn value(&mut self, path: &str) -> Result<(), LibconfigError> {
        match self.bump() {
            Some(Tok::Scalar(v)) => {
                self.out.push((path.to_string(), v));
                Ok(())
            }
            Some(Tok::Punct('{')) => self.settings(path, Some('}')),
            Some(Tok::Punct(open @ ('[' | '('))) => {
                let close = if open == '[' { ']' } else { ')' };
                loop {
                    match self.peek() {
                        Some(Tok::Punct(c)) if *c == close => {
                            self.pos += 1;
                            return Ok(());
                        }
                        Some(Tok::Punct(',')) => self.pos += 1,
                        None => return Err(self.err(format!("missing '{close}'"))),
                        _ => self.value(&format!("{path}[]"))?,
                    }
                }
            }
            other => Err(self.err(format!("expected a value for {path}, found {other:?}"))),
        }
    }
}

/// Parses a libconfig file into its scalar settings, flattened as `group.name`, in file order.
/// Elements of arrays and lists come out as `name[]`.
///
/// # Errors
/// The first syntax error, with its line.
pub fn parse(text: &str) -> Result<Vec<(String, Value)>, LibconfigError> {
    let mut p = Parser {
        toks: tokenize(text)?,
        pos: 0,
        out: Vec::new(),
    };
    p.settings("", None)?;
    Ok(p.out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_scalars_comments_and_strings() {
        let s = parse(
            "a = 1; // c\n g : { b = \"x\" \"y\"; c = 0x10L, d = TRUE; e = -2.5 } ;\n# x\n /* y\n */ f = [1, 2]; h = (\"q\", 3);",
        )
        .unwrap();
        assert_eq!(
            s,
            vec![
                ("a".into(), Value::Int(1)),
                ("g.b".into(), Value::Str("xy".into())),
                ("g.c".into(), Value::Int(16)),
                ("g.d".into(), Value::Bool(true)),
                ("g.e".into(), Value::Float(-2.5)),
                ("f[]".into(), Value::Int(1)),
                ("f[]".into(), Value::Int(2)),
                ("h[]".into(), Value::Str("q".into())),
                ("h[]".into(), Value::Int(3)),
            ]
        );
    }

    #[test]
    fn errors_name_the_line() {
        let e = parse("a = 1;\nb = ;\n").unwrap_err();
        assert_eq!(e.line, 2);
        assert!(parse("g = { a = 1;").is_err());
        assert!(parse("a = \"open").is_err());
        assert!(parse("@include \"x\"").is_err());
        assert!(parse("a = 12zz;").is_err());
    }
}
