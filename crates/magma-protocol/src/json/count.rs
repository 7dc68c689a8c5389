//! Counting the containers of a top-level array without building them: how
//! a reader that knows how many elements a document may hold refuses a
//! longer one before it costs anything.

use super::lex::{Limits, escaped_string_end, ws_end};
use super::parse::Parser;

/// The index, in the top-level array of `src`, of its element number `n`
/// (0-based) among those that are objects or arrays, the elements before it
/// read as the parser reads them (the same syntax and depth rules) without
/// building them. `None` when `src` is not such an array, or holds `n` such
/// elements or fewer, or has a syntax error before that element: the
/// parser then reads the document and reports what it has to.
///
/// Scalars are not counted: the parser keeps only the first ones where a
/// model belongs and counts the rest, so that they cost nothing.
///
/// Two passes, so that a document within the count costs one light pass:
/// the first finds the element by the structure alone (strings, brackets,
/// commas), the second, only when there is one, reads the elements before
/// it as the parser would.
pub(crate) fn nth_container(src: &[u8], limits: Limits, n: usize) -> Option<usize> {
    if src.starts_with("\u{feff}".as_bytes()) || limits.depth == 0 {
        return None;
    }
    let open = ws_end(src, 0);
    if src.get(open) != Some(&b'[') {
        return None;
    }
    let index = find_nth_container(src, open, n)?;
    let text = std::str::from_utf8(src).ok()?;
    let mut p = Parser::new(src, text, limits);
    let mut i = open;
    for _ in 0..index {
        p.set_pos(ws_end(src, i + 1));
        p.skip_value(1).ok()?;
        i = ws_end(src, p.pos());
        if src.get(i) != Some(&b',') {
            return None;
        }
    }
    let at = ws_end(src, i + 1);
    matches!(src.get(at), Some(b'{' | b'[')).then_some(index)
}

/// The first pass of [`nth_container`]: the index of the element by the
/// structure alone, valid or not (the second pass checks), from the `[`
/// at `open`.
fn find_nth_container(src: &[u8], open: usize, n: usize) -> Option<usize> {
    let mut seen = 0usize;
    let mut index = 0usize;
    let mut depth = 0usize;
    let mut i = open + 1;
    // At the start of an element of the top-level array.
    let mut element = true;
    loop {
        if element {
            i = ws_end(src, i);
            element = false;
            if matches!(src.get(i), Some(b'{' | b'[')) {
                if seen == n {
                    return Some(index);
                }
                seen += 1;
            }
        }
        match *src.get(i)? {
            b'"' => {
                i = escaped_string_end(src, i + 1);
                if src.get(i) != Some(&b'"') {
                    return None;
                }
            }
            b'{' | b'[' => depth += 1,
            b'}' | b']' => {
                if depth == 0 {
                    return None;
                }
                depth -= 1;
            }
            b',' if depth == 0 => {
                index += 1;
                element = true;
            }
            _ => {}
        }
        i += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::super::TEST_LIMITS;
    use super::*;

    fn nth(doc: &str, n: usize) -> Option<usize> {
        nth_container(doc.as_bytes(), TEST_LIMITS, n)
    }

    #[test]
    fn counts_the_containers_of_the_top_level_array_only() {
        let doc = r#" [ 0, {"a": [1, {}]}, "x", [], {"b": "]"}, null ] "#;
        assert_eq!(nth(doc, 0), Some(1));
        assert_eq!(nth(doc, 1), Some(3));
        assert_eq!(nth(doc, 2), Some(4));
        assert_eq!(nth(doc, 3), None);
        // Not an array, or an empty one.
        assert_eq!(nth(r#"{"a": [{}]}"#, 0), None);
        assert_eq!(nth("[]", 0), None);
        assert_eq!(nth("", 0), None);
        // A syntax error before the element: left to the parser.
        assert_eq!(nth(r#"[{"a": 1,}, {}]"#, 1), None);
        assert_eq!(nth("[0 {}]", 0), None);
        assert_eq!(nth("\u{feff}[{}]", 0), None);
        // An error after it does not matter: the element is there.
        assert_eq!(nth(r#"[{}, {}, {"#, 1), Some(1));
        // Brackets and commas in strings, escaped quotes included.
        let doc = r#"["{,[", {"a\"]": "}"}, "\\", [",", "]"], {}]"#;
        assert_eq!(nth(doc, 0), Some(1));
        assert_eq!(nth(doc, 1), Some(3));
        assert_eq!(nth(doc, 2), Some(4));
        assert_eq!(nth(doc, 3), None);
        // What the structure alone would count, the parser refuses.
        assert_eq!(nth(r#"[{"a" 1}, {}]"#, 1), None);
        assert_eq!(nth(r#"[{"a": tru}, {}]"#, 1), None);
        assert_eq!(nth("[{\"a\": \"\u{1}\"}, {}]", 1), None);
        assert_eq!(nth(r#"[{]}, {}]"#, 1), None);
    }

    #[test]
    fn the_elements_before_keep_the_parsers_depth_limit() {
        let limits = Limits {
            depth: 3,
            free_form_depth: 254,
        };
        assert_eq!(nth_container(b"[[[]], {}]", limits, 1), Some(1));
        assert_eq!(nth_container(b"[[[[]]], {}]", limits, 1), None);
    }
}
