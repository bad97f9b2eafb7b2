//! Errors that point at a place in a text the user wrote: `file:line: message`.
//!
//! Every TOML input (topology, admission script, scenario, manager configuration) is
//! parsed through [`parse_toml`], so unknown keys, bad units and type errors all come out
//! as one line naming the file and line at fault. Semantic checks done after parsing
//! (a route through a missing port, a flow between unknown nodes) use [`Located::at`]
//! with the span serde gave them (`toml::Spanned`) or [`line_of`] to do the same.
//! Nothing here reads files: the caller passes the text (or the bytes, through
//! [`decode_text`], so a file that is not UTF-8 is named at the line of its first bad
//! byte) and the name to print.

use std::fmt;

/// A message tied to a line (and column) of a named input.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct Located {
    /// The input's name as the user knows it (usually its path).
    pub file: String,
    /// 1-based line, if known.
    pub line: Option<usize>,
    /// 1-based column, if known.
    pub column: Option<usize>,
    /// What is wrong, in one line.
    pub message: String,
}

impl fmt::Display for Located {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.line, self.column) {
            (Some(l), Some(c)) => write!(f, "{}:{}:{}: {}", self.file, l, c, self.message),
            (Some(l), None) => write!(f, "{}:{}: {}", self.file, l, self.message),
            _ => write!(f, "{}: {}", self.file, self.message),
        }
    }
}

impl Located {
    /// A message about byte offset `offset` of `text` (e.g. a `toml::Spanned` start).
    pub fn at(file: &str, text: &str, offset: usize, message: impl Into<String>) -> Self {
        let (line, column) = line_of(text, offset);
        Located {
            file: file.to_string(),
            line: Some(line),
            column: Some(column),
            message: message.into(),
        }
    }
    /// A message about the input as a whole.
    pub fn whole(file: &str, message: impl Into<String>) -> Self {
        Located {
            file: file.to_string(),
            line: None,
            column: None,
            message: message.into(),
        }
    }
}

/// 1-based (line, column) of byte `offset` in `text`.
pub fn line_of(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = &text.as_bytes()[..offset];
    let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
    let line_start = before
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |p| p + 1);
    let column = text[line_start..offset].chars().count() + 1;
    (line, column)
}

/// The bytes of file `file` as text: UTF-8, or a `file:line:col` error at the first byte
/// that is not (a file saved in Latin-1 or UTF-16, or a binary given by mistake).
pub fn decode_text(file: &str, bytes: Vec<u8>) -> Result<String, Located> {
    String::from_utf8(bytes).map_err(|e| {
        let good = e.utf8_error().valid_up_to();
        let bytes = e.as_bytes();
        // Valid by construction: `valid_up_to` is where the first bad sequence starts.
        let text = std::str::from_utf8(&bytes[..good]).unwrap_or_default();
        Located::at(
            file,
            text,
            good,
            format!(
                "not UTF-8 text (byte 0x{:02X}); save the file as UTF-8",
                bytes[good]
            ),
        )
    })
}

/// Parses TOML `text` into `T`, reporting any error as `file:line:col: message` in one
/// line (the toml crate's multi-line excerpt is reduced to its message).
pub fn parse_toml<T: serde::de::DeserializeOwned>(file: &str, text: &str) -> Result<T, Located> {
    toml::from_str(text).map_err(|e| {
        let message = e.message().trim().replace('\n', " ");
        match e.span() {
            Some(span) => Located::at(file, text, span.start, message),
            None => Located::whole(file, message),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Cfg {
        name: String,
        rate: crate::units::Bandwidth,
    }

    #[test]
    fn unknown_key_names_file_and_line() {
        let e =
            parse_toml::<Cfg>("x.toml", "name = \"a\"\nrate = \"1MB/s\"\nspeed = 3\n").unwrap_err();
        assert_eq!(e.line, Some(3));
        let s = e.to_string();
        assert!(s.starts_with("x.toml:3:"), "{s}");
        assert!(s.contains("speed"), "{s}");
        assert!(!s.contains('\n'));
    }

    #[test]
    fn bad_unit_names_file_and_line() {
        let e = parse_toml::<Cfg>("x.toml", "name = \"a\"\n\nrate = \"1 parsec\"\n").unwrap_err();
        assert_eq!(e.line, Some(3), "{e}");
        assert!(e.to_string().contains("unknown unit"), "{e}");
    }

    #[test]
    fn a_byte_that_is_not_utf8_is_named_at_its_line_and_column() {
        let e = decode_text("x.toml", b"a = 1\nb = \"caf\xE9\"\n".to_vec()).unwrap_err();
        assert_eq!((e.line, e.column), (Some(2), Some(9)), "{e}");
        assert_eq!(
            e.to_string(),
            "x.toml:2:9: not UTF-8 text (byte 0xE9); save the file as UTF-8"
        );
        let e = decode_text("y.toml", vec![0xFF, 0xFE, b'a']).unwrap_err();
        assert_eq!((e.line, e.column), (Some(1), Some(1)), "{e}");
        assert_eq!(decode_text("z", "é\n".into()).unwrap(), "é\n");
    }

    #[test]
    fn line_of_counts_from_one() {
        assert_eq!(line_of("ab\ncd", 0), (1, 1));
        assert_eq!(line_of("ab\ncd", 4), (2, 2));
    }
}
