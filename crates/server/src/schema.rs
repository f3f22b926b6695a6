//! Tool schemas in the subset of JSON Schema every client accepts, and
//! the parts of them written at start-up. schemars writes an `Option` as
//! `"type": ["number", "null"]` and numbers with `format` values such as
//! `double` or `uint64`; some clients (those that map schemas onto a
//! single-`type` dialect, such as Gemini's function declarations) reject or
//! misread those. Schemas come from the argument and reply types; this
//! module rewrites them, and adds `jobs_ended`, `jobs_waiting`, `sandbox`,
//! `sandbox_denial` and `notes` (any reply may carry them) and descriptions that state configured
//! limits. It defines no type and words no reply.

use rmcp::handler::server::tool::schema_for_output;
use rmcp::model::JsonObject;
use serde_json::Value;

use crate::render;

/// The `format` values JSON Schema defines; any other is left out.
pub(crate) const STANDARD_FORMATS: &[&str] = &[
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

/// Declares, in an output schema, the fields any reply may carry besides
/// its own: `jobs_ended` and `jobs_waiting` (background jobs that ended,
/// or began waiting for input, since the last reply, each reported once),
/// `servers_died` (earlier servers that died with commands running, said
/// once), `sandbox` and `sandbox_denial` (what a confined session or
/// command runs under, and a failure it most likely caused) and `notes` (notices about the call, such as the unknown arguments
/// it gave; a type that declares `notes` itself keeps its own).
pub(crate) fn declare_notices(schema: &mut JsonObject) {
    let Some(Value::Object(properties)) = schema.get_mut("properties") else { return };
    let lists = [
        (
            "jobs_ended",
            "Background jobs that ended since the last reply, each reported once.",
            items::<render::JobEndedOutput>(),
        ),
        (
            "jobs_waiting",
            "Background jobs that began waiting for input, each wait reported once.",
            items::<render::JobWaitingOutput>(),
        ),
        (
            "servers_died",
            "Earlier servers that died with commands running; said once, in the first reply of \
             the server after them.",
            items::<render::ServerDiedOutput>(),
        ),
    ];
    for (name, description, item) in lists {
        let list = serde_json::json!({"type": "array", "description": description, "items": item});
        properties.insert(name.to_owned(), list);
    }
    // What a confined session or command runs under, and why a failed
    // one most likely failed because of it.
    let mut sandbox = items::<render::sandbox::SandboxOutput>();
    sandbox["description"] = "What the sandbox enforces (on every reply while one is on: \
                              --sandbox, --network, or the call's own)."
        .into();
    properties.insert("sandbox".to_owned(), sandbox);
    let mut denial = items::<render::sandbox::DenialOutput>();
    denial["description"] = "Set when a failed command was most likely stopped by the \
                             sandbox, not by the program (the notes say so in words)."
        .into();
    properties.insert("sandbox_denial".to_owned(), denial);
    let notes = serde_json::json!({
        "type": "array",
        "description": "Notices about this call, as in the text: for example the unknown \
                        arguments it gave, which were ignored.",
        "items": {"type": "string"},
    });
    properties.entry("notes").or_insert(notes);
}

/// The schema of `T` as the items of a list inside another schema: without
/// `$schema` and `title`, its definitions put in place of their references.
fn items<T: rmcp::schemars::JsonSchema + 'static>() -> Value {
    let mut item = (*schema_for_output::<T>()).clone();
    item.remove("$schema");
    item.remove("title");
    if let Some(Value::Object(defs)) = item.remove("$defs") {
        for value in item.values_mut() {
            inline_refs(value, &defs);
        }
    }
    Value::Object(item)
}

/// Replaces each `{"$ref": "#/$defs/NAME"}` in `value` with `NAME`'s
/// schema from `defs` (which hold no references of their own).
fn inline_refs(value: &mut Value, defs: &JsonObject) {
    match value {
        Value::Object(map) => {
            let target = map
                .get("$ref")
                .and_then(Value::as_str)
                .and_then(|r| r.strip_prefix("#/$defs/"))
                .and_then(|name| defs.get(name));
            if let Some(def) = target {
                *value = def.clone();
            } else {
                map.values_mut().for_each(|v| inline_refs(v, defs));
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| inline_refs(v, defs)),
        _ => {}
    }
}

/// Sets the description of `property` in an input or output schema; a
/// description that states configured limits is written at start-up.
pub(crate) fn describe_property(schema: &mut JsonObject, property: &str, description: String) {
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
pub(crate) fn portable(schema: &JsonObject) -> JsonObject {
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
        super::declare_notices(&mut schema);
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

    /// `servers_died`'s items name a type of their own (the commands):
    /// inside another schema its definition stands in place, no `$ref` to
    /// `$defs` the outer schema does not have.
    #[test]
    fn servers_died_is_declared_with_its_definitions_in_place() {
        let serde_json::Value::Object(mut schema) = json!({"type": "object", "properties": {}})
        else {
            unreachable!()
        };
        super::declare_notices(&mut schema);
        let servers = &schema["properties"]["servers_died"];
        let shown = servers.to_string();
        assert!(!shown.contains("$ref") && !shown.contains("$defs"), "{servers:#}");
        let running = &servers["items"]["properties"]["running"]["items"];
        assert_eq!(running["properties"]["background"]["type"], "boolean", "{servers:#}");
    }

    #[test]
    fn notes_are_declared_once_and_a_type_of_its_own_keeps_its_own() {
        let serde_json::Value::Object(mut schema) = json!({"type": "object", "properties": {}})
        else {
            unreachable!()
        };
        super::declare_notices(&mut schema);
        let notes = &schema["properties"]["notes"];
        assert_eq!((&notes["type"], &notes["items"]["type"]), (&json!("array"), &json!("string")));
        let serde_json::Value::Object(mut own) = json!({"type": "object", "properties": {
            "notes": {"type": "array", "items": {"type": "string"}, "description": "own"},
        }}) else {
            unreachable!()
        };
        super::declare_notices(&mut own);
        assert_eq!(own["properties"]["notes"]["description"], "own", "{own:#?}");
    }

    #[test]
    fn jobs_waiting_is_declared_from_its_type() {
        let serde_json::Value::Object(mut schema) = json!({"type": "object", "properties": {}})
        else {
            unreachable!()
        };
        super::declare_notices(&mut schema);
        let jobs = &schema["properties"]["jobs_waiting"];
        assert_eq!(jobs["type"], "array", "{jobs:#}");
        let item = &jobs["items"];
        let mut required: Vec<&str> =
            item["required"].as_array().unwrap().iter().map(|n| n.as_str().unwrap()).collect();
        required.sort_unstable();
        assert_eq!(required, ["command", "prompt", "session"], "{jobs:#}");
        assert_eq!(item["properties"]["prompt"]["type"], "string", "{jobs:#}");
        assert!(item.get("$schema").is_none() && item.get("title").is_none(), "{jobs:#}");
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
