//! [`ExportResult`]: what an exporter gives back for one example, with its
//! [`ExportRecord`]s; their constructors, validators and writers.

use crate::error::{Error, ErrorKind, Issue};
use crate::json::write::write_str;
use crate::json::{Json, Location, Object, Shape, WriteJson, to_value};
use crate::limits::READ;
use crate::validate::{
    Fields, NonEmptyString, Validate, Validation, free_object, list, literal, model_object,
    non_empty, opt_str, pattern_str, strict_str,
};

/// How the reference spells the dataset name's pattern.
const DATASET_PATTERN: &str = "^[a-zA-Z0-9][a-zA-Z0-9_-]*$";

/// `^[a-zA-Z0-9][a-zA-Z0-9_-]*$`, where `$` is the very end (`"chat\n"`
/// fails, as in pydantic's Rust regex engine).
fn is_dataset_name(s: &str) -> bool {
    let mut bytes = s.bytes();
    bytes.next().is_some_and(|b| b.is_ascii_alphanumeric())
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Where a record holds free-form objects, for the parser.
const RECORD_SHAPE: Shape = Shape::Model {
    declared: &["record_id", "dataset", "data"],
    fields: &[
        ("record_id", Shape::Scalar),
        ("dataset", Shape::Scalar),
        ("data", Shape::FreeObject),
    ],
};
/// Where a result holds free-form objects, for the parser.
const RESULT_SHAPE: Shape = Shape::Model {
    declared: &["example_id", "status", "records", "reason"],
    fields: &[
        ("example_id", Shape::Scalar),
        ("status", Shape::Scalar),
        ("records", Shape::List(&RECORD_SHAPE)),
        ("reason", Shape::Scalar),
    ],
};

/// One row of a dataset: `data` lands in the dataset file the exporter's
/// renderer names for `dataset` (GEN's `filenames`).
#[derive(Debug, Clone, PartialEq)]
pub struct ExportRecord {
    record_id: NonEmptyString,
    dataset: String,
    data: Object,
}

impl ExportRecord {
    /// A record; fails on an empty `record_id` or a `dataset` that is not
    /// a name (`^[a-zA-Z0-9][a-zA-Z0-9_-]*$`).
    pub fn new(
        record_id: impl Into<String>,
        dataset: impl Into<String>,
        data: Object,
    ) -> Result<Self, Error> {
        let mut cx = Validation::new("ExportRecord");
        let id = cx.at_field("record_id", |cx| {
            non_empty(Json::String(record_id.into()), cx)
        });
        let dataset = cx.at_field("dataset", |cx| {
            dataset_name(Json::String(dataset.into()), cx)
        });
        match (id, dataset) {
            (Some(record_id), Some(dataset)) => cx.finish(ExportRecord {
                record_id,
                dataset,
                data,
            }),
            _ => cx.finish_opt(None),
        }
    }

    /// The record's id.
    pub fn record_id(&self) -> &str {
        &self.record_id
    }

    /// The dataset (channel) it belongs to.
    pub fn dataset(&self) -> &str {
        &self.dataset
    }

    /// The row.
    pub fn data(&self) -> &Object {
        &self.data
    }

    /// The row, consuming the record.
    pub fn into_data(self) -> Object {
        self.data
    }
}

/// `status` of an export result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ExportStatus {
    /// `"exported"`: the example gave records.
    Exported,
    /// `"skipped"`: the exporter chose not to export it (with a reason).
    Skipped,
    /// `"error"`: exporting it failed (with a reason); GEN lists it in
    /// `export_failures.json` and marks the export incomplete.
    Error,
}

impl ExportStatus {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            ExportStatus::Exported => "exported",
            ExportStatus::Skipped => "skipped",
            ExportStatus::Error => "error",
        }
    }
}

/// What an exporter gives for one example. Always valid (`exported` has
/// records; `skipped` and `error` have a non-empty reason and no records),
/// which is why its fields are reached through methods.
#[derive(Debug, Clone, PartialEq)]
pub struct ExportResult {
    example_id: String,
    status: ExportStatus,
    records: Vec<ExportRecord>,
    reason: Option<String>,
}

impl ExportResult {
    /// An `exported` result; fails without records.
    pub fn exported(
        example_id: impl Into<String>,
        records: Vec<ExportRecord>,
    ) -> Result<Self, Error> {
        Self::build(example_id.into(), ExportStatus::Exported, records, None)
    }

    /// A `skipped` result; fails on an empty reason.
    pub fn skipped(
        example_id: impl Into<String>,
        reason: impl Into<String>,
    ) -> Result<Self, Error> {
        Self::build(
            example_id.into(),
            ExportStatus::Skipped,
            Vec::new(),
            Some(reason.into()),
        )
    }

    /// An `error` result; fails on an empty reason.
    pub fn error(example_id: impl Into<String>, reason: impl Into<String>) -> Result<Self, Error> {
        Self::build(
            example_id.into(),
            ExportStatus::Error,
            Vec::new(),
            Some(reason.into()),
        )
    }

    /// An `error` result that cannot fail: an empty reason becomes
    /// `"unknown error"`.
    pub fn failed(example_id: impl Into<String>, reason: impl Into<String>) -> Self {
        let mut reason = reason.into();
        if reason.is_empty() {
            reason = "unknown error".to_owned();
        }
        ExportResult {
            example_id: example_id.into(),
            status: ExportStatus::Error,
            records: Vec::new(),
            reason: Some(reason),
        }
    }

    fn build(
        example_id: String,
        status: ExportStatus,
        records: Vec<ExportRecord>,
        reason: Option<String>,
    ) -> Result<Self, Error> {
        let mut cx = Validation::new("ExportResult");
        let result = ExportResult {
            example_id,
            status,
            records,
            reason,
        };
        if let Some(issue) = status_issue(&result) {
            cx.push(issue);
        }
        cx.finish(result)
    }

    /// The example's id.
    pub fn example_id(&self) -> &str {
        &self.example_id
    }

    /// The status.
    pub fn status(&self) -> ExportStatus {
        self.status
    }

    /// The records (none unless `exported`).
    pub fn records(&self) -> &[ExportRecord] {
        &self.records
    }

    /// The records, consuming the result.
    pub fn into_records(self) -> Vec<ExportRecord> {
        self.records
    }

    /// Why it was skipped or failed (may also be given on `exported`).
    pub fn reason(&self) -> Option<&str> {
        self.reason.as_deref()
    }
}

/// The reference's `validate_status`, on a result whose fields are valid.
fn status_issue(result: &ExportResult) -> Option<Issue> {
    let msg = match result.status {
        ExportStatus::Exported if result.records.is_empty() => {
            "Value error, Exported examples require records"
        }
        ExportStatus::Exported => return None,
        _ if !result.records.is_empty() || result.reason.as_deref().is_none_or(str::is_empty) => {
            "Value error, Skipped/error examples require a reason and no records"
        }
        _ => return None,
    };
    Some(
        Issue::new(ErrorKind::ValueError, Location::root(), msg).with_input(to_value(result, READ)),
    )
}

// ---------------------------------------------------------------------------
// Validation, field by field in the reference's declaration order

fn dataset_name(v: Json, cx: &mut Validation) -> Option<String> {
    pattern_str(v, cx, DATASET_PATTERN, is_dataset_name)
}

impl Validate for ExportRecord {
    fn validate(v: Json, cx: &mut Validation) -> Option<Self> {
        let obj = model_object(v, "ExportRecord", cx)?;
        let mut f = Fields::new(obj, &["record_id", "dataset", "data"], cx);
        let id = f.required("record_id", cx, non_empty);
        let dataset = f.required("dataset", cx, dataset_name);
        let data = f.required("data", cx, free_object);
        f.finish(cx).then_some(())?;
        Some(ExportRecord {
            record_id: id?,
            dataset: dataset?,
            data: data?,
        })
    }
}

fn export_record(v: Json, cx: &mut Validation) -> Option<ExportRecord> {
    ExportRecord::validate(v, cx)
}

fn export_result(v: Json, cx: &mut Validation) -> Option<ExportResult> {
    let obj = model_object(v, "ExportResult", cx)?;
    let mut f = Fields::new(obj, &["example_id", "status"], cx);
    let id = f.required("example_id", cx, strict_str);
    let status = f.required("status", cx, |v, cx| {
        literal(v, cx, &["exported", "skipped", "error"]).map(|i| match i {
            0 => ExportStatus::Exported,
            1 => ExportStatus::Skipped,
            _ => ExportStatus::Error,
        })
    });
    let records = f.optional("records", cx, Vec::new, |v, cx| {
        list(v, cx, ExportRecord::validate)
    });
    let reason = f.optional("reason", cx, || None, opt_str);
    f.finish(cx).then_some(())?;
    let result = ExportResult {
        example_id: id?,
        status: status?,
        records: records?,
        reason: reason?,
    };
    if let Some(issue) = status_issue(&result) {
        cx.push(issue);
        return None;
    }
    Some(result)
}

// ---------------------------------------------------------------------------
// Writing, every field in the reference's order

impl WriteJson for ExportRecord {
    fn write_json(&self, out: &mut String) {
        out.push_str("{\"record_id\":");
        write_str(out, &self.record_id);
        out.push_str(",\"dataset\":");
        write_str(out, &self.dataset);
        out.push_str(",\"data\":");
        self.data.write_json(out);
        out.push('}');
    }

    fn size_hint(&self) -> usize {
        40 + self.record_id.len() + self.dataset.len() + self.data.size_hint()
    }
}

impl WriteJson for ExportResult {
    fn write_json(&self, out: &mut String) {
        out.push_str("{\"example_id\":");
        write_str(out, &self.example_id);
        out.push_str(",\"status\":\"");
        out.push_str(self.status.as_str());
        out.push_str("\",\"records\":");
        self.records.write_json(out);
        out.push_str(",\"reason\":");
        self.reason.write_json(out);
        out.push('}');
    }

    fn size_hint(&self) -> usize {
        64 + self.example_id.len() + self.records.size_hint() + self.reason.size_hint()
    }
}

document!(ExportRecord, &RECORD_SHAPE, export_record);
document!(ExportResult, &RESULT_SHAPE, export_result);
