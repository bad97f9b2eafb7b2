//! Where a key of a scenario file is: the configuration's checks
//! name the value at fault by a key path (`router.buffer`, `classes[2].rate`), and this
//! finds the line that wrote it with the spans `toml_edit` keeps, so that every
//! semantic error points at `file:line`. A key left to its default is reported at the
//! nearest enclosing key or table that is in the file.

use toml_edit::{ImDocument, Item, Table, Value};

/// One step of a key path.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Step<'a> {
    Key(&'a str),
    Index(usize),
}

/// Splits `a.b[2].c` into its steps.
fn steps(path: &str) -> Vec<Step<'_>> {
    let mut out = Vec::new();
    for part in path.split('.').filter(|p| !p.is_empty()) {
        let (name, rest) = part.split_once('[').unwrap_or((part, ""));
        if !name.is_empty() {
            out.push(Step::Key(name));
        }
        for idx in rest.split('[') {
            if let Ok(i) = idx.trim_end_matches(']').parse() {
                out.push(Step::Index(i));
            }
        }
    }
    out
}

/// A place in the parsed document.
#[derive(Clone, Copy)]
enum Node<'a> {
    Item(&'a Item),
    Value(&'a Value),
    Table(&'a Table),
}

impl<'a> Node<'a> {
    fn span(self) -> Option<std::ops::Range<usize>> {
        match self {
            Node::Item(i) => i.span(),
            Node::Value(v) => v.span(),
            Node::Table(t) => t.span(),
        }
    }

    /// The child under `step`, and the span of its key when it has one.
    fn child(self, step: &Step<'_>) -> Option<(Node<'a>, Option<std::ops::Range<usize>>)> {
        match (self, step) {
            (Node::Table(t), Step::Key(k)) => t
                .get_key_value(k)
                .map(|(key, item)| (Node::Item(item), key.span())),
            (Node::Item(i), Step::Key(k)) => i
                .as_table_like()?
                .get_key_value(k)
                .map(|(key, item)| (Node::Item(item), key.span())),
            (Node::Value(Value::InlineTable(t)), Step::Key(k)) => t
                .get_key_value(k)
                .map(|(key, item)| (Node::Item(item), key.span())),
            (Node::Item(Item::ArrayOfTables(a)), Step::Index(n)) => {
                a.get(*n).map(|t| (Node::Table(t), None))
            }
            (Node::Item(Item::Value(Value::Array(a))), Step::Index(n))
            | (Node::Value(Value::Array(a)), Step::Index(n)) => {
                a.get(*n).map(|v| (Node::Value(v), None))
            }
            _ => None,
        }
    }
}

/// Byte offset in `text` of the key at `path` (steps from the document's root), or of
/// the deepest part of it present; `None` if the text does not parse or has none of it.
pub fn offset(text: &str, path: &str) -> Option<usize> {
    let doc = ImDocument::parse(text).ok()?;
    let mut node = Node::Table(doc.as_table());
    let mut best = None;
    for step in steps(path) {
        let Some((next, key_span)) = node.child(&step) else {
            break;
        };
        best = key_span.or_else(|| next.span()).or(best);
        node = next;
    }
    best.map(|r| r.start)
}

/// `message` at the line of the key at `path` in `text` (or about the whole file when
/// the text has none of it).
pub fn located(
    file: &str,
    text: &str,
    path: &str,
    message: impl Into<String>,
) -> qos_core::source::Located {
    match offset(text, path) {
        Some(o) => qos_core::source::Located::at(file, text, o, message),
        None => qos_core::source::Located::whole(file, message),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use qos_core::source::line_of;

    const TEXT: &str = "name = \"x\"\n[network]\ntopology = { kind = \"mesh\", k = 9 }\n[network.router]\nbuffer = 0\n[[network.classes]]\nname = \"a\"\nvls = [0]\n[[network.classes]]\nname = \"b\"\nrate = 2.0\n";

    fn line(path: &str) -> Option<usize> {
        offset(TEXT, path).map(|o| line_of(TEXT, o).0)
    }

    #[test]
    fn keys_in_tables_inline_tables_and_arrays_of_tables_are_found() {
        assert_eq!(line("network.router.buffer"), Some(5));
        assert_eq!(line("network.topology.k"), Some(3));
        assert_eq!(line("network.classes[1].rate"), Some(11));
        assert_eq!(line("network.classes[0].vls"), Some(8));
    }

    #[test]
    fn a_key_left_to_its_default_is_reported_at_its_table() {
        // classes[0] has no `rate`: its table's header line.
        assert_eq!(line("network.classes[0].rate"), Some(6));
        assert_eq!(line("network.router.delays.credit"), Some(4));
        assert_eq!(line("nothing.here"), None);
    }

    #[test]
    fn paths_split_into_keys_and_indices() {
        assert_eq!(
            steps("a.b[2].c"),
            vec![
                Step::Key("a"),
                Step::Key("b"),
                Step::Index(2),
                Step::Key("c")
            ]
        );
    }
}
