//! The JSON Schema of the plan format, shipped in docs/plan.schema.json and
//! printed by `git orch plan schema`.
//!
//! The schema is written by hand (it documents), and tests keep it honest:
//! its properties and required lists must be exactly the fields of the Rust
//! types, and the printed text must equal the file in docs/.

/// The schema text.
pub const SCHEMA: &str = include_str!("../../docs/plan.schema.json");

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::plan::format::{GateSetting, Plan};

    fn schema() -> serde_json::Value {
        serde_json::from_str(SCHEMA).expect("schema is JSON")
    }

    /// Field names a fully populated value serialises to.
    fn fields<T: serde::Serialize>(value: &T) -> BTreeSet<String> {
        serde_json::to_value(value)
            .expect("serialises")
            .as_object()
            .expect("object")
            .keys()
            .cloned()
            .collect()
    }

    fn props(v: &serde_json::Value) -> BTreeSet<String> {
        v["properties"]
            .as_object()
            .expect("properties")
            .keys()
            .cloned()
            .collect()
    }

    fn required(v: &serde_json::Value) -> BTreeSet<String> {
        v["required"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|x| x.as_str().expect("str").to_owned())
                    .collect()
            })
            .unwrap_or_default()
    }

    fn full_plan() -> Plan {
        let text = r#"{"version":1,"id":"p","instruction":"i","target":"main",
            "gates":{"test":{"run":"make test","mode":"block","timeout":60}},
            "subtasks":[{"id":"a","title":"t","owned_globs":["a/**"],"deliverable":"d",
            "verification":"make a","depends_on":["b"],"serial_only":true,"branch":"x/a",
            "agent":"claude","candidates":["claude","codex"],"retries":1,"gates":{"lint":{"mode":"warn"}}},
            {"id":"b","title":"t","owned_globs":["b/**"],"deliverable":"d","verification":"make b"}]}"#;
        crate::plan::format::parse(text.as_bytes()).expect("full plan parses")
    }

    #[test]
    fn schema_properties_are_exactly_the_rust_fields() {
        let s = schema();
        let plan = full_plan();
        assert_eq!(props(&s), fields(&plan), "plan fields");
        assert_eq!(
            props(&s["$defs"]["subtask"]),
            fields(&plan.subtasks[0]),
            "subtask fields"
        );
        let gate = GateSetting {
            run: Some("x".into()),
            mode: Some(crate::plan::format::GateMode::Warn),
            timeout: Some(1),
        };
        assert_eq!(props(&s["$defs"]["gate"]), fields(&gate), "gate fields");
    }

    #[test]
    fn schema_required_fields_are_exactly_the_ones_serde_requires() {
        let s = schema();
        let plan = serde_json::to_value(full_plan()).expect("value");
        for (value, schema_obj, what) in [
            (plan.clone(), &s, "plan"),
            (
                plan["subtasks"][0].clone(),
                &s["$defs"]["subtask"],
                "subtask",
            ),
        ] {
            let obj = value.as_object().expect("object");
            for key in obj.keys() {
                let mut without = plan.clone();
                if what == "plan" {
                    without.as_object_mut().expect("obj").remove(key);
                } else {
                    without["subtasks"][0]
                        .as_object_mut()
                        .expect("obj")
                        .remove(key);
                }
                let parses = serde_json::from_value::<Plan>(without).is_ok();
                assert_eq!(
                    !parses,
                    required(schema_obj).contains(key),
                    "{what}.{key}: required in schema iff serde requires it"
                );
            }
        }
    }
}
