// A form for a node's params, generated from the JSON Schema /api/node-types/ gives (pydantic's output): strings,
// enums, numbers, booleans, optional fields (anyOf [X, null]), `$ref`s into `$defs`, and hints the schema may
// carry: `x-enum-labels` (an enum's options in words), `x-widget: "textarea"`, `x-widget: "model"` (a model picker
// fed by the provider catalogue) and `x-widget: "hidden"` (a field the type's own section of the side panel edits; kept as it is). Fields with
// `x-providers` show only while the provider field holds one of them; `x-advanced` ones fold under "More settings".
// Picking another provider puts that provider's default model in the model field (unless it knows the one typed).
(function () {
  "use strict";

  function resolve(schema, root) {
    if (schema && schema.$ref) {
      const name = schema.$ref.split("/").pop();
      return Object.assign({}, (root.$defs || root.definitions || {})[name] || {}, withoutRef(schema));
    }
    return schema || {};
  }

  function withoutRef(schema) {
    const copy = Object.assign({}, schema);
    delete copy.$ref;
    return copy;
  }

  // {schema, nullable}: an optional pydantic field is anyOf [X, {type: null}].
  function unwrap(property, root) {
    let schema = resolve(property, root);
    let nullable = false;
    if (Array.isArray(schema.anyOf)) {
      const parts = schema.anyOf.map((part) => resolve(part, root));
      nullable = parts.some((part) => part.type === "null");
      const main = parts.find((part) => part.type !== "null") || {};
      schema = Object.assign({}, main, {
        title: schema.title || main.title,
        description: schema.description || main.description,
        default: schema.default,
        "x-widget": schema["x-widget"] || main["x-widget"],
        "x-provider-field": schema["x-provider-field"] || main["x-provider-field"],
        "x-providers": schema["x-providers"] || main["x-providers"],
        "x-advanced": schema["x-advanced"] || main["x-advanced"],
      });
    }
    return { schema, nullable };
  }

  function el(tag, attrs, text) {
    const node = document.createElement(tag);
    Object.entries(attrs || {}).forEach(([key, value]) => {
      if (value === undefined || value === null || value === false) return;
      if (key === "className") node.className = value;
      else node.setAttribute(key, value === true ? "" : String(value));
    });
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function modelOptions(catalogue, provider) {
    const entry = (catalogue || []).find((p) => p.id === provider);
    return entry ? entry.models.map((m) => m.id) : [];
  }

  function defaultModel(catalogue, provider) {
    const entry = (catalogue || []).find((p) => p.id === provider);
    return entry ? entry.defaultModel || "" : "";
  }

  // Renders into `container`; calls onChange(newParams, fieldName) on every edit. Returns {refresh(params),
  // showErrors({field: message})}.
  function render(container, { schema, params, idPrefix, catalogue, onChange }) {
    const root = schema || {};
    const properties = root.properties || {};
    const required = new Set(root.required || []);
    const values = Object.assign({}, params || {});
    const fields = {};
    container.textContent = "";
    const form = el("div", { className: "schema-form" });
    const more = el("details", { className: "more-settings" });
    more.append(el("summary", {}, "More settings"));
    const providerFields = new Set();
    Object.values(properties).forEach((property) => {
      const providerField = unwrap(property, root).schema["x-provider-field"];
      if (providerField) providerFields.add(providerField);
    });
    Object.entries(properties).forEach(([name, property]) => {
      const { schema: field, nullable } = unwrap(property, root);
      if ((field["x-widget"] || property["x-widget"]) === "hidden") return; // edited by the type's own panel section
      const id = `${idPrefix}-${name}`;
      const wrap = el("div", { className: "field", "data-field": name });
      if (Array.isArray(field["x-providers"])) wrap.dataset.providers = field["x-providers"].join(" ");
      const label = el("label", { for: id }, field.title || name);
      const optional = !required.has(name) && (field.default === undefined || field.default === null);
      if (optional) label.append(el("span", { className: "meta" }, " (optional)"));
      wrap.append(label);
      let input;
      const widget = field["x-widget"];
      if (Array.isArray(field.enum)) {
        input = el("select", { id, name });
        if (nullable || !required.has(name)) input.append(el("option", { value: "" }, nullable ? "(default)" : ""));
        const labels = field["x-enum-labels"] || property["x-enum-labels"] || {};
        field.enum.forEach((option) => input.append(el("option", { value: option }, String(labels[option] ?? option))));
      } else if (field.type === "boolean") {
        input = el("input", { id, name, type: "checkbox" });
      } else if (field.type === "integer" || field.type === "number") {
        input = el("input", {
          id, name, type: "number", inputmode: field.type === "integer" ? "numeric" : "decimal",
          min: field.minimum ?? field.exclusiveMinimum, max: field.maximum ?? field.exclusiveMaximum,
          step: field.type === "integer" ? 1 : "any",
          placeholder: nullable ? "default" : undefined,
        });
      } else if (widget === "textarea") {
        input = el("textarea", { id, name, rows: 4, maxlength: field.maxLength });
      } else {
        input = el("input", { id, name, type: "text", maxlength: field.maxLength, autocomplete: "off" });
        if (widget === "model") {
          const list = el("datalist", { id: `${id}-options` });
          input.setAttribute("list", list.id);
          wrap.append(list);
          fields[name] = { input, list, providerField: field["x-provider-field"] };
        }
      }
      fields[name] = Object.assign(fields[name] || {}, { input, field, nullable });
      wrap.insertBefore(input, wrap.querySelector("datalist"));
      if (field.description) {
        const help = el("p", { className: "help", id: `${id}-help` }, field.description);
        input.setAttribute("aria-describedby", help.id);
        wrap.append(help);
      }
      wrap.append(el("p", { className: "field-error", id: `${id}-error`, role: "alert", hidden: true }));
      (field["x-advanced"] ? more : form).append(wrap);
      fields[name].wrap = wrap;
      const handler = () => {
        const value = read(fields[name]);
        if (value === undefined) delete values[name];
        else values[name] = value;
        if (providerFields.has(name)) switchProvider(name);
        refreshModels();
        onChange(Object.assign({}, values), name);
      };
      input.addEventListener(input.tagName === "SELECT" || input.type === "checkbox" ? "change" : "input", handler);
    });
    if (!Object.keys(properties).length) form.append(el("p", { className: "empty" }, "This node has no settings."));
    if (more.children.length > 1) form.append(more);
    container.append(form);

    function shownFor(entry) {
      const wanted = entry.wrap.dataset.providers;
      if (!wanted) return true;
      return [...providerFields].some((field) => wanted.split(" ").includes(values[field] ?? (fields[field] || {}).field?.default));
    }

    function switchProvider(providerField) {
      // Another provider: its default model (unless it knows the one typed), and no settings of the old one.
      Object.values(fields).forEach((entry) => {
        if (entry.providerField !== providerField) return;
        const name = entry.input.name;
        const provider = values[providerField];
        if (!modelOptions(catalogue, provider).includes(values[name])) {
          values[name] = defaultModel(catalogue, provider);
          entry.input.value = values[name];
        }
      });
      Object.entries(fields).forEach(([name, entry]) => {
        if (!shownFor(entry) && values[name] !== undefined) {
          delete values[name];
          entry.input.value = "";
        }
      });
    }

    function applyProviders() {
      Object.values(fields).forEach((entry) => { entry.wrap.hidden = !shownFor(entry); });
      const shownAdvanced = [...more.querySelectorAll(".field")].filter((wrap) => !wrap.hidden);
      more.hidden = !shownAdvanced.length;
    }

    function read({ input, field, nullable }) {
      if (input.type === "checkbox") return input.checked;
      const raw = input.value;
      if (raw === "") return nullable || field.default !== undefined ? undefined : "";
      if (field.type === "integer") return Number.isNaN(parseInt(raw, 10)) ? raw : parseInt(raw, 10);
      if (field.type === "number") return Number.isNaN(parseFloat(raw)) ? raw : parseFloat(raw);
      return raw;
    }

    function refreshModels() {
      applyProviders();
      Object.values(fields).forEach((entry) => {
        if (!entry.list) return;
        const provider = values[entry.providerField];
        entry.list.textContent = "";
        modelOptions(catalogue, provider).forEach((model) => entry.list.append(el("option", { value: model })));
      });
    }

    function refresh(next) {
      const copy = Object.assign({}, next || {});
      Object.keys(values).forEach((key) => delete values[key]);
      Object.assign(values, copy);
      Object.entries(fields).forEach(([name, { input, field }]) => {
        const value = values[name] !== undefined ? values[name] : field.default;
        if (input.type === "checkbox") input.checked = Boolean(value);
        else input.value = value === undefined || value === null ? "" : String(value);
      });
      refreshModels();
    }

    function showErrors(errors) {
      Object.entries(fields).forEach(([name, { input }]) => {
        const box = container.querySelector(`#${CSS.escape(input.id)}-error`);
        const message = (errors || {})[name];
        box.hidden = !message;
        box.textContent = message || "";
        input.setAttribute("aria-invalid", message ? "true" : "false");
        if (message && more.contains(input)) more.open = true; // a problem is never folded away
      });
    }

    refresh(values);
    return { refresh, showErrors };
  }

  window.SchemaForm = { render, unwrap };
})();
