//! Where something is in a document: [`Location`], a list of [`Segment`]s.

use std::fmt;

use super::Json;

/// One step of a [`Location`]: an object key or an array index.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Segment {
    /// An object key.
    Key(String),
    /// An array index.
    Index(usize),
}

/// Where a problem is, from the document root: `inputs[0].id`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Location(Vec<Segment>);

impl Location {
    /// The root of the document.
    pub fn root() -> Self {
        Location(Vec::new())
    }

    /// The steps from the root.
    pub fn segments(&self) -> &[Segment] {
        &self.0
    }

    /// `true` at the root.
    pub fn is_root(&self) -> bool {
        self.0.is_empty()
    }

    /// This location with one more step.
    pub fn join(&self, segment: Segment) -> Location {
        let mut v = self.0.clone();
        v.push(segment);
        Location(v)
    }

    /// The location as a JSON array of keys and indices, as pydantic's `loc`.
    pub fn to_json(&self) -> Json {
        Json::Array(self.0.iter().map(segment_json).collect())
    }
}

/// A segment as JSON: a key is a string, an index a number.
pub(crate) fn segment_json(s: &Segment) -> Json {
    match s {
        Segment::Key(k) => Json::String(k.clone()),
        Segment::Index(i) => Json::from(*i),
    }
}

impl From<Vec<Segment>> for Location {
    fn from(v: Vec<Segment>) -> Self {
        Location(v)
    }
}

impl fmt::Display for Location {
    /// `inputs[0].instruction.type`; the root is `(root)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.write_str("(root)");
        }
        for (i, seg) in self.0.iter().enumerate() {
            match seg {
                Segment::Index(n) => write!(f, "[{n}]")?,
                Segment::Key(k) => {
                    let plain = !k.is_empty()
                        && k.chars()
                            .all(|c| c.is_alphanumeric() || c == '_' || c == '-');
                    match (i, plain) {
                        (0, true) => f.write_str(k)?,
                        (_, true) => write!(f, ".{k}")?,
                        (_, false) => write!(f, "[{}]", Json::String(k.clone()))?,
                    }
                }
            }
        }
        Ok(())
    }
}
