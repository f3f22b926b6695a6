//! Tool schemas in the subset of JSON Schema every client accepts, and
//! the parts of them written at start-up. schemars writes an `Option` as
//! `"type": ["number", "null"]` and numbers with `format` values such as
//! `double` or `uint64`; some clients (those that map schemas onto a
//! single-`type` dialect, such as Gemini's function declarations) reject or
//! misread those. Schemas come from the argument and reply types; this
//! module rewrites them, and adds `jobs_ended` and `notes` (any reply may
//! carry them) and descriptions that state configured limits. It defines no type and words
//! no reply.

use rmcp::handler::server::tool::schema_for_output;
use rmcp::model::JsonObject;
use serde_json::Value;

use crate::render;

/// The `format` values JSON Schema defines; any other is left out.
pub const STANDARD_FORMATS: &[&str] = &[
    "date-time",
    "date",
    "time",
    "duration",
    "email",
    "idn-email",
    "hostname",
    "idn-hostname",
    "ipv4",
    "ipv6",
    "uri",
    "uri-reference",
    "iri",
    "iri-reference",
    "uuid",
    "uri-template",
    "json-pointer",
    "relative-json-pointer",
    "regex",
];

/// Declares `jobs_ended`, which any reply may carry (background jobs
/// that ended since the last reply, each reported once), in an output
/// schema. The items' schema is [`render::JobEndedOutput`]'s.
pub fn declare_jobs_ended(schema: &mut JsonObject) {
    let mut item = (*schema_for_output::<render::JobEndedOutput>()).clone();
    item.remove("$schema");
    item.remove("title");
    let jobs = serde_json::json!({
        "type": "array",
        "description": "Background jobs that ended since the last reply, each reported once.",
        "items": Value::Object(item),
    });
    if let Some(Value::Object(properties)) = schema.get_mut("properties") {
        properties.insert("jobs_ended".to_owned(), jobs);
    }
}

/// Declares `notes`, which any reply may carry (the unknown arguments a
/// call gave, which were ignored; a tool's own notices), in an output
/// schema whose type does not declare it already.
pub fn declare_notes(schema: &mut JsonObject) {
    let notes = serde_json::json!({
        "type": "array",
        "description": "Notices about this call, as in the text: for example the unknown \
                        arguments it gave, which were ignored.",
        "items": {"type": "string"},
    });
    if let Some(Value::Object(properties)) = schema.get_mut("properties") {
        properties.entry("notes").or_insert(notes);
    }
}

/// Sets the description of `property` in an input or output schema; a
/// description that states configured limits is written at start-up.
pub fn describe_property(schema: &mut JsonObject, property: &str, description: String) {
    if let Some(Value::Object(properties)) = schema.get_mut("properties")
        && let Some(Value::Object(property)) = properties.get_mut(property)
    {
        property.insert("description".to_owned(), Value::String(description));
    }
}

/// `schema` rewritten for portability: an optional property (one not in
/// `required`) has its plain type without `null`; a property that is
/// always present but may be `null` becomes `anyOf` of single-type
/// branches; `null` defaults and non-standard formats are dropped.
pub fn portable(schema: &JsonObject) -> JsonObject {
    let mut schema = schema.clone();
    walk(&mut schema);
    schema
}

fn walk(schema: &mut JsonObject) {
    if schema.get("default") == Some(&Value::Null) {
        schema.remove("default");
    }
    if let Some(Value::String(format)) = schema.get("format")
        && !STANDARD_FORMATS.contains(&format.as_str())
    {
        schema.remove("format");
    }
    let required: Vec<String> = match schema.get("required") {
        Some(Value::Array(names)) => {
            names.iter().filter_map(|n| n.as_str().map(str::to_owned)).collect()
        }
        _ => Vec::new(),
    };
    if let Some(Value::Object(properties)) = schema.get_mut("properties") {
        for (name, property) in properties.iter_mut() {
            if let Value::Object(property) = property {
                single_type(property, required.contains(name));
            }
        }
    }
    for (key, value) in schema.iter_mut() {
        match (key.as_str(), value) {
            ("properties" | "$defs" | "definitions" | "patternProperties", Value::Object(map)) => {
                for sub in map.values_mut() {
                    if let Value::Object(sub) = sub {
                        walk(sub);
                    }
                }
            }
            ("items" | "additionalProperties" | "not" | "contains", Value::Object(sub)) => {
                walk(sub)
            }
            ("anyOf" | "oneOf" | "allOf" | "prefixItems", Value::Array(list)) => {
                for sub in list {
                    if let Value::Object(sub) = sub {
                        walk(sub);
                    }
                }
            }
            _ => {}
        }
    }
    // A single type, not a list of one.
    if let Some(Value::Array(types)) = schema.get("type")
        && types.len() == 1
    {
        let only = types[0].clone();
        schema.insert("type".to_owned(), only);
    }
}

/// Rewrites a property's `type` list: `null` dropped when the property
/// may be left out, else one `anyOf` branch per type.
fn single_type(property: &mut JsonObject, required: bool) {
    if let Some(Value::Array(types)) = property.get("type").cloned() {
        let non_null: Vec<Value> = types.into_iter().filter(|t| t != "null").collect();
        let nullable = non_null.len() < property["type"].as_array().map_or(0, Vec::len);
        if !nullable || !required {
            property.insert("type".to_owned(), Value::Array(non_null));
        } else {
            property.remove("type");
            let mut branches: Vec<Value> =
                non_null.into_iter().map(|t| serde_json::json!({"type": t})).collect();
            branches.push(serde_json::json!({"type": "null"}));
            property.insert("anyOf".to_owned(), Value::Array(branches));
        }
    }
    if !required && let Some(Value::Array(branches)) = property.get_mut("anyOf") {
        branches.retain(|branch| branch.get("type") != Some(&Value::String("null".into())));
        if branches.len() == 1
            && let Some(Value::Object(only)) = branches.pop()
        {
            property.remove("anyOf");
            for (key, value) in only {
                property.entry(key).or_insert(value);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    fn portable(schema: serde_json::Value) -> serde_json::Value {
        let serde_json::Value::Object(schema) = schema else { unreachable!() };
        serde_json::Value::Object(super::portable(&schema))
    }

    #[test]
    fn jobs_ended_is_declared_from_its_type() {
        let serde_json::Value::Object(mut schema) = json!({"type": "object", "properties": {}})
        else {
            unreachable!()
        };
        super::declare_jobs_ended(&mut schema);
        let jobs = &schema["properties"]["jobs_ended"];
        assert_eq!(jobs["type"], "array", "{jobs:#}");
        let item = &jobs["items"];
        let mut required: Vec<&str> =
            item["required"].as_array().unwrap().iter().map(|n| n.as_str().unwrap()).collect();
        required.sort_unstable();
        assert_eq!(
            required,
            ["command", "exit_code", "kept_sec", "ran_sec", "session"],
            "{jobs:#}"
        );
        assert_eq!(item["properties"]["exit_code"]["type"], "integer", "{jobs:#}");
        assert_eq!(item["properties"]["ran_sec"]["type"], "number", "{jobs:#}");
        assert_eq!(
            item["properties"]["command"]["description"], "Its command (cut to 200 characters).",
            "{jobs:#}"
        );
        assert!(item.get("$schema").is_none() && item.get("title").is_none(), "{jobs:#}");
    }

    #[test]
    fn notes_are_declared_once_and_a_type_of_its_own_keeps_its_own() {
        let serde_json::Value::Object(mut schema) = json!({"type": "object", "properties": {}})
        else {
            unreachable!()
        };
        super::declare_notes(&mut schema);
        let notes = &schema["properties"]["notes"];
        assert_eq!((&notes["type"], &notes["items"]["type"]), (&json!("array"), &json!("string")));
        let serde_json::Value::Object(mut own) = json!({"type": "object", "properties": {
            "notes": {"type": "array", "items": {"type": "string"}, "description": "own"},
        }}) else {
            unreachable!()
        };
        super::declare_notes(&mut own);
        assert_eq!(own["properties"]["notes"]["description"], "own", "{own:#?}");
    }

    #[test]
    fn optional_properties_lose_null_and_required_ones_become_any_of() {
        let schema = json!({
            "type": "object",
            "required": ["always"],
            "properties": {
                "optional": {"type": ["number", "null"], "format": "double", "default": null},
                "always": {"type": ["string", "null"], "description": "d"},
                "count": {"type": "integer", "format": "uint64", "minimum": 0},
                "when": {"type": "string", "format": "date-time"},
                "nested": {"type": "object", "properties": {
                    "deep": {"anyOf": [{"$ref": "#/$defs/X"}, {"type": "null"}]},
                }},
            },
        });
        assert_eq!(
            portable(schema),
            json!({
                "type": "object",
                "required": ["always"],
                "properties": {
                    "optional": {"type": "number"},
                    "always": {
                        "anyOf": [{"type": "string"}, {"type": "null"}],
                        "description": "d",
                    },
                    "count": {"type": "integer", "minimum": 0},
                    "when": {"type": "string", "format": "date-time"},
                    "nested": {"type": "object", "properties": {
                        "deep": {"$ref": "#/$defs/X"},
                    }},
                },
            })
        );
    }
}
