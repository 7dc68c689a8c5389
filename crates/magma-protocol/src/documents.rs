//! The contract's documents, each registered once: its stable name (the
//! `kind` of `magma-validate check --kind`, of `batch` and of the fixture and
//! corpus files), its Rust type, its family, its parser and, with feature
//! `schema`, its JSON Schema. The exchanges (a request and the answer
//! checked against it) are listed beside them.
//!
//! Everything that names document kinds (the validator's `check` and
//! `batch`, the CLI's `--kind`, the fixture, corpus and fuzz tests) reads
//! them from here, so a new document is its model file plus one line in
//! `documents!` below, and a name that is not a kind is an error that lists
//! the kinds.
//!
//! ```
//! use magma_protocol::documents::{Document, DocumentKind, Family};
//!
//! let kind: DocumentKind = "health".parse().unwrap();
//! assert_eq!((kind.type_name(), kind.family()), ("AgentHealth", Family::Inference));
//! let doc = kind.parse(br#"{"status": "ready"}"#).unwrap();
//! assert!(matches!(doc, Document::Health(_)));
//! assert_eq!(doc.to_json_string(), r#"{"status":"ready"}"#);
//!
//! let issue = DocumentKind::Request.parse(br#"{"inputs": []}"#).unwrap_err();
//! assert_eq!(issue.first().location().to_string(), "request_id");
//!
//! let unknown = "healthy".parse::<DocumentKind>().unwrap_err();
//! assert!(unknown.to_string().starts_with(
//!     "unknown document kind \"healthy\": expected request, response, info, health, "
//! ));
//! ```

use std::fmt;
use std::str::FromStr;

use crate::error::Error;
use crate::exchange::{ExchangeError, validate_exchange};
use crate::json::Json;
use crate::{SpecializedCoachingRequest, SpecializedCoachingResponse};

/// Where a document belongs in magma-core.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Family {
    /// The inference contract (`magma_core.protocol.agent`).
    Inference,
    /// The coaching extension (`magma_core.protocol.agent_coaching`), the
    /// types of `magma_protocol::coaching`.
    Coaching,
    /// Local dataset export (magma-core's `graph.py` and
    /// `agent_export.py`), the types of `magma_protocol::export`.
    Export,
}

impl Family {
    /// `inference`, `coaching` or `export`.
    pub const fn name(self) -> &'static str {
        match self {
            Family::Inference => "inference",
            Family::Coaching => "coaching",
            Family::Export => "export",
        }
    }
}

/// The registry: one line per document, `Variant = "name" => Type, Family,
/// "what it is"`, in documentation order (inference, coaching, export).
/// `Type` has `from_slice`, `from_json` and `to_json_string` (the
/// `document!` macro of `model/mod.rs` gives them to a new model) and
/// `Serialize`.
macro_rules! documents {
    ($($kind:ident = $name:literal => $ty:ident, $family:ident, $doc:literal;)*) => {
        /// A document of the contract (see [the registry](self)).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[non_exhaustive]
        pub enum DocumentKind {
            $(
                #[doc = concat!($doc, ": [`", stringify!($ty), "`](crate::", stringify!($ty),
                    "), named `", $name, "`.")]
                $kind,
            )*
        }

        /// A parsed, valid document of any kind.
        #[derive(Debug, Clone, PartialEq)]
        #[non_exhaustive]
        // The types as they are (a coaching request is about 600 bytes): a
        // parse's result is matched at once, a box would cost an allocation.
        #[allow(clippy::large_enum_variant)]
        pub enum Document {
            $(
                #[doc = concat!($doc, ".")]
                $kind(crate::$ty),
            )*
        }

        /// The names, in [`DocumentKind::ALL`] order.
        const DOCUMENT_NAMES: &[&str] = &[$($name),*];

        impl DocumentKind {
            /// Every kind, in documentation order.
            pub const ALL: [DocumentKind; DOCUMENT_NAMES.len()] = [$(DocumentKind::$kind),*];

            /// The stable name (`request`, `coaching_request`, ...): the
            /// `kind` of the validator's `check` and `batch`, and of the
            /// fixture and corpus files.
            pub const fn name(self) -> &'static str {
                match self {
                    $(DocumentKind::$kind => $name,)*
                }
            }

            /// The Rust type's name (`AgentRequest`), which is also the
            /// reference's model name and the name of its JSON Schema.
            pub const fn type_name(self) -> &'static str {
                match self {
                    $(DocumentKind::$kind => stringify!($ty),)*
                }
            }

            /// The part of magma-core the document belongs to.
            pub const fn family(self) -> Family {
                match self {
                    $(DocumentKind::$kind => Family::$family,)*
                }
            }

            /// Parses and validates a body as the reference does: the
            /// document, or every problem with its location.
            pub fn parse(self, bytes: &[u8]) -> Result<Document, Error> {
                match self {
                    $(DocumentKind::$kind => crate::$ty::from_slice(bytes).map(Document::$kind),)*
                }
            }

            /// Validates an already parsed value (`from_json` of the type).
            pub fn validate(self, value: Json) -> Result<Document, Error> {
                match self {
                    $(DocumentKind::$kind => crate::$ty::from_json(value).map(Document::$kind),)*
                }
            }
        }

        impl Document {
            /// Its kind.
            pub const fn kind(&self) -> DocumentKind {
                match self {
                    $(Document::$kind(_) => DocumentKind::$kind,)*
                }
            }

            /// Compact JSON, as the type's own `to_json_string` writes it.
            pub fn to_json_string(&self) -> String {
                match self {
                    $(Document::$kind(doc) => doc.to_json_string(),)*
                }
            }
        }

        impl serde::Serialize for Document {
            /// The type's own `Serialize`: the bytes of `to_json_string`
            /// for serde_json.
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                match self {
                    $(Document::$kind(doc) => doc.serialize(s),)*
                }
            }
        }
    };
}

documents! {
    Request = "request" => AgentRequest, Inference, "A `POST /v1/responses` body";
    Response = "response" => AgentResponse, Inference, "Its answer, a JSON array of candidates";
    Info = "info" => AgentInfo, Inference, "A `GET /v1/info` answer";
    Health = "health" => AgentHealth, Inference, "A `GET /health` answer";
    CoachingRequest = "coaching_request" => SpecializedCoachingRequest, Coaching, "A `POST /v1/coaching` body";
    CoachingResponse = "coaching_response" => SpecializedCoachingResponse, Coaching, "Its answer";
    CoachingSession = "coaching_session" => CoachingSessionConfig, Coaching, "A `PUT /v1/coaching/sessions/{run_id}` body";
    InternalStep = "internal_step" => InternalStep, Coaching, "One record of a candidate's `internal_steps`";
    ReplaceSay = "replace_say" => ReplaceSay, Coaching, "The `extra_keys` of a `replace_say` proposal";
    SituationLink = "situation_link" => SituationLink, Export, "A link from a saved candidate to a situation";
    CandidateRecord = "candidate_record" => CandidateRecord, Export, "One candidate of a saved generation graph";
    SituationRecord = "situation_record" => SituationRecord, Export, "One situation file (`<id>.json`) of a saved graph";
    ExportExample = "export_example" => ExportExample, Export, "One example GEN's export hands an exporter";
    ExportRecord = "export_record" => ExportRecord, Export, "One dataset row of an export result";
    ExportResult = "export_result" => ExportResult, Export, "What an exporter gives for one example";
}

impl DocumentKind {
    /// The JSON Schema of the document, when its type publishes one (the
    /// list of [`crate::schema`]); the export documents have none yet.
    #[cfg(feature = "schema")]
    #[cfg_attr(docsrs, doc(cfg(feature = "schema")))]
    pub fn schema(self) -> Option<crate::schema::Schema> {
        crate::schema::Schema::WIRE_TYPES
            .into_iter()
            .find(|s| s.name() == self.type_name())
    }
}

impl fmt::Display for DocumentKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for DocumentKind {
    type Err = UnknownKind;
    /// The [`name`](DocumentKind::name), exactly.
    fn from_str(s: &str) -> Result<Self, UnknownKind> {
        DocumentKind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| UnknownKind::new(s, "document kind", DOCUMENT_NAMES.to_vec()))
    }
}

/// A request and the answer checked against it: both documents, then the
/// answer's `validate_request`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum ExchangeKind {
    /// An inference request and its response, named `exchange`:
    /// [`validate_exchange`].
    Inference,
    /// A coaching request and its reply, named `coaching_exchange`:
    /// [`SpecializedCoachingResponse::validate_request`].
    Coaching,
}

/// The names, in [`ExchangeKind::ALL`] order.
const EXCHANGE_NAMES: &[&str] = &["exchange", "coaching_exchange"];

impl ExchangeKind {
    /// Every exchange.
    pub const ALL: [ExchangeKind; 2] = [ExchangeKind::Inference, ExchangeKind::Coaching];

    /// `exchange` or `coaching_exchange`: the `kind` of the validator's
    /// `batch` and of the fixture and corpus files.
    pub const fn name(self) -> &'static str {
        match self {
            ExchangeKind::Inference => EXCHANGE_NAMES[0],
            ExchangeKind::Coaching => EXCHANGE_NAMES[1],
        }
    }

    /// The kind of the request.
    pub const fn request(self) -> DocumentKind {
        match self {
            ExchangeKind::Inference => DocumentKind::Request,
            ExchangeKind::Coaching => DocumentKind::CoachingRequest,
        }
    }

    /// The kind of the answer.
    pub const fn response(self) -> DocumentKind {
        match self {
            ExchangeKind::Inference => DocumentKind::Response,
            ExchangeKind::Coaching => DocumentKind::CoachingResponse,
        }
    }

    /// The request, then the answer, then whether the answer answers the
    /// request: [`ExchangeError::Mismatch`] (`candidates_mismatch`) or
    /// [`ExchangeError::CoachingMismatch`] (`coaching_mismatch`).
    pub fn validate(self, request: &[u8], response: &[u8]) -> Result<(), ExchangeError> {
        match self {
            ExchangeKind::Inference => validate_exchange(request, response),
            ExchangeKind::Coaching => {
                let request = SpecializedCoachingRequest::from_slice(request)
                    .map_err(ExchangeError::Request)?;
                SpecializedCoachingResponse::from_slice(response)
                    .map_err(ExchangeError::Response)?
                    .validate_request(&request)
                    .map_err(ExchangeError::CoachingMismatch)
            }
        }
    }
}

impl fmt::Display for ExchangeKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for ExchangeKind {
    type Err = UnknownKind;
    /// The [`name`](ExchangeKind::name), exactly.
    fn from_str(s: &str) -> Result<Self, UnknownKind> {
        ExchangeKind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| UnknownKind::new(s, "exchange kind", EXCHANGE_NAMES.to_vec()))
    }
}

/// The `kind` of a `magma-validate batch` line or of a fixture or corpus
/// case: a document or an exchange.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum CaseKind {
    /// One document.
    Document(DocumentKind),
    /// A request and its answer.
    Exchange(ExchangeKind),
}

impl CaseKind {
    /// Every kind: the documents, then the exchanges.
    pub fn all() -> impl Iterator<Item = CaseKind> {
        let documents = DocumentKind::ALL.into_iter().map(CaseKind::Document);
        documents.chain(ExchangeKind::ALL.into_iter().map(CaseKind::Exchange))
    }

    /// The document's or the exchange's name.
    pub const fn name(self) -> &'static str {
        match self {
            CaseKind::Document(kind) => kind.name(),
            CaseKind::Exchange(kind) => kind.name(),
        }
    }
}

impl fmt::Display for CaseKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for CaseKind {
    type Err = UnknownKind;
    /// A document's or an exchange's name, exactly.
    fn from_str(s: &str) -> Result<Self, UnknownKind> {
        let document = s.parse().map(CaseKind::Document);
        let exchange = || s.parse().map(CaseKind::Exchange);
        document
            .or_else(|_| exchange())
            .map_err(|_| UnknownKind::new(s, "kind", CaseKind::all().map(CaseKind::name).collect()))
    }
}

/// A name that is not a [`DocumentKind`], [`ExchangeKind`] or
/// [`CaseKind`]; its message lists the names there are.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {what} {name:?}: expected {}", one_of(.names))]
pub struct UnknownKind {
    name: String,
    what: &'static str,
    names: Vec<&'static str>,
}

impl UnknownKind {
    fn new(name: &str, what: &'static str, names: Vec<&'static str>) -> UnknownKind {
        UnknownKind {
            name: name.to_owned(),
            what,
            names,
        }
    }

    /// The name as given.
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// `a, b or c`.
fn one_of(names: &[&str]) -> String {
    match names.split_last() {
        Some((last, [])) => (*last).to_owned(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests;
