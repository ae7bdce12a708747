// infraplan pages: form <-> URL query string <-> JSON API; the answer's report sections are
// inserted as the server rendered them and its figures drawn with infraplanDraw (above).
(function () {
  'use strict';
  var form = document.querySelector('form.plan');
  if (!form) { return; }
  var result = document.getElementById('result');
  var errorBox = document.getElementById('error');
  var statusBox = document.getElementById('status');
  var inspectBox = document.getElementById('inspect');
  var noticeBox = document.getElementById('notice');
  var modelField = form.elements.namedItem('model');
  var file = document.getElementById('config-file');
  var uploaded = null;  // {name, config} of an uploaded config.json (kept in memory only)
  var uploadError = '';  // why the chosen file could not be used: a run must not go ahead

  function fields() {
    return Array.prototype.filter.call(form.elements, function (el) {
      return el.name && el.type !== 'file';
    });
  }
  function mode() {
    var m = form.elements.namedItem('mode');
    return m ? m.value : '';
  }
  function active(el) {
    var wrap = el.closest('[data-mode]');
    return !wrap || wrap.getAttribute('data-mode') === mode();
  }
  function showMode() {
    form.querySelectorAll('[data-mode]').forEach(function (el) {
      el.classList.toggle('hidden', el.getAttribute('data-mode') !== mode());
    });
    var endpoint = form.getAttribute('data-endpoint-' + mode());
    if (endpoint) { form.setAttribute('data-endpoint', endpoint); }
  }
  function values(el) {
    if (el.multiple) {
      return Array.prototype.filter.call(el.options, function (o) { return o.selected; })
        .map(function (o) { return o.value; });
    }
    return el.value.trim();
  }
  function setValue(el, text) {
    if (el.multiple) {
      var wanted = text.split(',');
      Array.prototype.forEach.call(el.options, function (o) {
        o.selected = wanted.indexOf(o.value) >= 0;
      });
    } else { el.value = text; }
  }
  function convert(el, v) {
    var type = el.getAttribute('data-type');
    if (type === 'int' || type === 'float') { return Number(v); }
    if (type === 'bool') { return v === 'true'; }
    if (type === 'list') {
      return Array.isArray(v) ? v : v.split(',').map(function (x) { return x.trim(); });
    }
    if (type === 'list-int') {
      return String(v).split(',').filter(function (x) { return x.trim(); }).map(Number);
    }
    return v;
  }
  function body() {
    var out = {};
    fields().forEach(function (el) {
      var type = el.getAttribute('data-type');
      var v = values(el);
      if (type === 'skip' || !active(el) || v === '' || (Array.isArray(v) && !v.length)) {
        return;
      }
      var key = el.getAttribute('data-key') || el.name;
      var group = el.getAttribute('data-group');
      var target = out;
      if (group) { target = out[group] = out[group] || {}; }
      target[key] = convert(el, v);
    });
    if (uploaded) {
      delete out.model;
      out.config = uploaded.config;
      out.name = uploaded.name;
    }
    return out;
  }
  function query() {
    var q = new URLSearchParams();
    fields().forEach(function (el) {
      var v = values(el);
      if (!active(el) || v === '' || (Array.isArray(v) && !v.length)) { return; }
      q.set(el.name, Array.isArray(v) ? v.join(',') : v);
    });
    if (uploaded) { q.set(UPLOAD_KEY, uploaded.name); }  // names it; cannot carry it
    return q.toString();
  }
  // why a link's value cannot go into `el`, or '' when it can
  function problem(el, text) {
    var type = el.getAttribute('data-type');
    var parts = el.multiple || type === 'list-int' ? text.split(',') : [text];
    if (el.tagName === 'SELECT') {
      var names = Array.prototype.map.call(el.options, function (o) { return o.value; });
      var bad = parts.filter(function (p) { return names.indexOf(p) < 0; });
      return bad.length ? bad.join(',') + ' is not one of ' +
        names.filter(Boolean).slice(0, 8).join(', ') + (names.length > 8 ? ', ...' : '') : '';
    }
    if (!text.trim()) { return ''; }
    if (type === 'int' || type === 'float' || type === 'list-int') {
      var whole = type !== 'float';
      var wrong = parts.some(function (p) {
        var n = Number(p);
        return !p.trim() || !isFinite(n) || (whole && !Number.isInteger(n));
      });
      if (wrong) { return whole ? 'not a whole number' : 'not a number'; }
    }
    return '';
  }
  function showNotice(text) {
    noticeBox.textContent = text;
    noticeBox.classList.toggle('hidden', !text);
  }
  // a catalog select's value from a link that names a row by an alias (gpu=h100), as
  // the CLI and the API accept: each name in its row's canonical spelling
  function canonical(el, text) {
    var names = el.catalogNames;
    if (!names) { return text; }
    return text.split(',').map(function (p) {
      var key = p.trim().toLowerCase();
      return Object.prototype.hasOwnProperty.call(names, key) ? names[key] : p;
    }).join(',');
  }
  // a link cannot carry an uploaded file: it names the upload, and the page waits for it
  var UPLOAD_KEY = 'uploaded';
  function missingUpload(name) {
    return 'this link was made with an uploaded config.json (' + name + '), which a link ' +
      'cannot carry. To fix: upload that config.json, or pick a catalog model';
  }
  // fills the form from the address bar; says which of the link's values it left out
  function applyQuery() {
    var q = new URLSearchParams(window.location.search);
    var any = false;
    var ignored = [];
    var byName = {};
    fields().forEach(function (el) { byName[el.name] = el; });
    var upload = modelField && file ? q.get(UPLOAD_KEY) : null;
    q.forEach(function (text, name) {
      if (upload !== null && name === UPLOAD_KEY) { return; }
      var el = byName[name];
      text = el ? canonical(el, text) : text;
      var why = el ? problem(el, text) : 'not a field of this page';
      if (why) {
        ignored.push(name + '=' + text + ' (' + why + ')');
      } else if (el) {
        setValue(el, text);
        any = true;
      }
    });
    showMode();
    var notes = ignored.length ? ['ignored from the link: ' + ignored.join('; ')] : [];
    if (upload !== null) {
      // nothing runs until the file is back: the catalog default is not the linked model
      setUpload(null, missingUpload(upload), 'upload ' + upload + ' again');
      notes.unshift(missingUpload(upload));
      any = false;
    }
    showNotice(notes.join('. '));
    return any;
  }
  function fillCatalogs() {
    var selects = form.querySelectorAll('select[data-catalog]');
    return Promise.all(Array.prototype.map.call(selects, function (el) {
      return fetch('/api/catalog/' + el.getAttribute('data-catalog'))
        .then(function (r) { return r.json(); })
        .then(function (rows) {
          var wanted = (el.getAttribute('data-default') || '').split(',');
          el.catalogNames = {};
          rows.forEach(function (row) {
            [row.name].concat(row.aliases || []).forEach(function (n) {
              el.catalogNames[String(n).toLowerCase()] = row.name;
            });
            var o = document.createElement('option');
            o.value = row.name;
            o.textContent = row.name;
            o.selected = wanted.indexOf(row.name) >= 0;
            el.appendChild(o);
          });
        });
    }));
  }
  function showError(text) {
    errorBox.textContent = text;
    errorBox.classList.toggle('hidden', !text);
    if (!text) { unmark(); }
  }
  // a message beside the field it is about (the error box, below the form, has them all)
  function unmark() {
    form.querySelectorAll('.field-error').forEach(function (n) { n.remove(); });
    form.querySelectorAll('label.invalid').forEach(function (n) {
      n.classList.remove('invalid');
    });
  }
  function mark(el, text) {
    var label = el.closest('label');
    if (!label) { return; }
    label.classList.add('invalid');
    var note = document.createElement('span');
    note.className = 'field-error';
    note.textContent = text;
    label.appendChild(note);
  }
  function labelOf(el) {
    var label = el.closest('label');
    return label ? label.firstChild.textContent.trim() : el.name;
  }
  // the field an API message is about: 'tp=3 ...', 'min_count 64 ...', 'traffic.cv: ...'
  function markDetail(detail) {
    var byPath = {};
    fields().forEach(function (el) {
      if (!active(el)) { return; }
      var key = el.getAttribute('data-key') || el.name;
      var group = el.getAttribute('data-group');
      byPath[group ? group + '.' + key : key] = el;
    });
    detail.split('; ').forEach(function (part) {
      var m = /^([A-Za-z_][\w.]*)(?::\s*|=|\s)/.exec(part);
      var el = m && Object.prototype.hasOwnProperty.call(byPath, m[1]) ? byPath[m[1]] : null;
      if (el && !el.closest('label.invalid')) { mark(el, part); }
    });
  }
  // a field the page shows filled in (a count, a size, a list) that is now empty: the API's
  // default for it may differ from the one the form showed, so the run is not sent
  function emptyRequired() {
    return fields().filter(function (el) {
      if (!active(el) || el.getAttribute('data-type') === 'skip') { return false; }
      var v = values(el);
      if (Array.isArray(v) ? v.length : v !== '') { return false; }
      return el.multiple || (el.tagName === 'INPUT' && el.defaultValue !== '' &&
                             !el.placeholder);
    });
  }
  function missingMessage(el) {
    return el.multiple ? 'none picked; pick at least one'
      : 'empty; enter a value (the form\'s default is ' + el.defaultValue + ')';
  }
  function kib(bytes) {  // as `infraplan model` prints it: 1,280.0 KiB
    return (bytes / 1024).toLocaleString('en-US', {minimumFractionDigits: 1,
                                                   maximumFractionDigits: 1}) + ' KiB';
  }
  function showInspect(a) {
    var rows = [['model', a.model + ' (' + a.family + ')'],
      ['parameters', a.params_total.toLocaleString() + (a.params_active !== a.params_total
        ? ' (' + a.params_active.toLocaleString() + ' active)' : '')],
      ['layers / hidden', a.layers + ' / ' + a.hidden_size],
      ['attention', a.attention.toUpperCase() + ', ' + a.heads + ' heads, ' + a.kv_heads +
        ' KV heads, head dim ' + a.head_dim],
      ['forward FLOPs per token', (a.forward_flops_per_token / 1e9).toFixed(2) + ' GFLOP'],
      ['training FLOPs per token', (a.training_flops_per_token / 1e9).toFixed(2) + ' GFLOP'],
      ['KV cache per token', kib(a.kv_cache_bytes_per_token.bf16) + ' in bf16, ' +
        kib(a.kv_cache_bytes_per_token.fp8) + ' in fp8']];
    if (a.sliding_window) {  // past the window only the global layers' cache grows
      rows.push(['sliding window', a.sliding_window.toLocaleString('en-US') + ' tokens on ' +
        a.windowed_layers + ' of ' + a.layers + ' layers: past it, a token adds ' +
        kib(a.kv_cache_bytes_per_token_beyond_window) + ' in bf16']);
    }
    // what the numbers leave out (a vision tower, a context past the model's)
    a.notes.forEach(function (n) { rows.push(['note', n]); });
    var dl = document.createElement('dl');
    dl.className = 'items';
    rows.forEach(function (r) {
      var d = document.createElement('div');
      d.setAttribute('data-label', r[0]);
      var dt = document.createElement('dt');
      dt.textContent = r[0];
      var dd = document.createElement('dd');
      dd.textContent = r[1];
      d.appendChild(dt);
      d.appendChild(dd);
      dl.appendChild(d);
    });
    inspectBox.replaceChildren(dl);
  }
  function clearAnswers() {
    result.replaceChildren();
    inspectBox.replaceChildren();
  }
  function failed(text) {  // no earlier answer stays on screen as if it were this one's
    showError(text);
    clearAnswers();
    statusBox.textContent = '';
  }
  // one button per suggested fix: it sets the fix's fields and checks again (and so puts
  // the fixed plan in the address bar)
  function showFixes(fixes) {
    if (!fixes || !fixes.length) { return; }
    var box = document.createElement('div');
    box.className = 'apply';
    var label = document.createElement('span');
    label.className = 'hint';
    label.textContent = 'apply a fix:';
    box.appendChild(label);
    fixes.forEach(function (fix) {
      var b = document.createElement('button');
      b.type = 'button';
      b.textContent = fix.label;
      b.addEventListener('click', function () {
        Object.keys(fix.fields).forEach(function (name) {
          var el = form.elements.namedItem(name);
          if (el) { setValue(el, fix.fields[name]); }
        });
        run(false);
      });
      box.appendChild(b);
    });
    (result.querySelector('#memory-fixes') || result).appendChild(box);
  }
  function run(fromLink) {
    showError('');
    if (!fromLink) { showNotice(''); }
    if (uploadError) { failed(uploadError); return Promise.resolve(); }
    var missing = emptyRequired();
    if (missing.length) {
      failed(missing.map(function (el) {
        return labelOf(el) + ' (' + el.name + '): ' + missingMessage(el);
      }).join('; '));
      missing.forEach(function (el) { mark(el, missingMessage(el)); });
      missing[0].focus();
      return Promise.resolve();
    }
    var url = form.getAttribute('data-endpoint');
    var inspecting = form.hasAttribute('data-inspect');
    var payload = body();
    // the address bar is what runs now, so that a copied link shares it
    history.replaceState(null, '', '?' + query());
    if (uploaded) {
      showNotice('the address bar holds this run\'s settings and the name of the uploaded ' +
        'config.json (' + uploaded.name + '), not the file: whoever opens the link must ' +
        'upload it too');
    }
    var button = form.querySelector('button[type=submit]');
    button.disabled = true;
    statusBox.textContent = 'running…';
    var started = Date.now();
    return fetch(url, {method: 'POST', headers: {'content-type': 'application/json'},
                       body: JSON.stringify(payload)})
      .then(function (r) {
        return r.json().catch(function () { return {detail: r.status + ' ' + r.statusText}; })
          .then(function (data) { return {ok: r.ok, data: data}; });
      })
      .then(function (answer) {
        if (!answer.ok) {
          var detail = answer.data.detail;
          failed(typeof detail === 'string' ? detail : JSON.stringify(detail));
          if (typeof detail === 'string') { markDetail(detail); }
          return;
        }
        if (inspecting) {
          showInspect(answer.data);
        } else {
          result.innerHTML = answer.data.html;  // escaped by the server
          showFixes(answer.data.document.apply);
          infraplanDraw(result, answer.data.document.figures);
          if (window.innerWidth < 600) { result.scrollIntoView(); }  // the form is long
        }
        statusBox.textContent = 'done in ' + ((Date.now() - started) / 1000).toFixed(1) + ' s';
        form.setAttribute('data-done', String(Date.now()));
      })
      .catch(function (e) { failed(String(e)); })
      .finally(function () { button.disabled = false; });
  }
  // the model select names the model a run uses: an upload is an entry of its own, and
  // picking a catalog model drops the upload
  var catalogChoice = '';
  function setUpload(upload, error, errorLabel) {
    uploaded = upload;
    uploadError = error || '';
    if (!modelField) { return; }
    var mark = modelField.querySelector('option[data-upload]');
    if (!upload && !error) {
      if (mark) {
        var shown = mark.selected;
        mark.remove();
        if (shown) { modelField.value = catalogChoice; }
      }
      return;
    }
    if (!mark) {
      catalogChoice = modelField.value;
      mark = document.createElement('option');
      mark.value = '';
      mark.setAttribute('data-upload', '');
      modelField.insertBefore(mark, modelField.firstChild);
    }
    mark.textContent = upload ? 'uploaded: ' + upload.name
      : errorLabel || 'unusable upload (see the error)';
    mark.selected = true;
  }
  function uploadFailed(text) {
    setUpload(null, text + '. To fix: upload a model\'s config.json or pick a catalog model');
    failed(uploadError);
  }
  if (modelField && file) {
    modelField.addEventListener('change', function () {
      if (!modelField.value || (!uploaded && !uploadError)) { return; }
      setUpload(null);
      file.value = '';
      inspectBox.replaceChildren();
      showError('');
    });
  }
  if (file) {
    file.addEventListener('change', function () {
      var f = file.files[0];
      if (!f) { setUpload(null); inspectBox.replaceChildren(); return; }
      f.text().then(function (text) {
        var config;
        try { config = JSON.parse(text); } catch (e) {
          uploadFailed(f.name + ': not valid JSON (' + e.message + ')');
          return;
        }
        setUpload({name: f.name.replace(/\.json$/, ''), config: config});
        var seq = form.elements.namedItem('seq_len');
        return fetch('/api/models/inspect', {method: 'POST',
          headers: {'content-type': 'application/json'},
          body: JSON.stringify({config: config, name: uploaded.name,
                                seq_len: seq ? Number(seq.value) || 4096 : 4096})})
          .then(function (r) { return r.json().then(function (d) { return [r.ok, d]; }); })
          .then(function (x) {
            // a config the server refuses stays chosen: a run shows the same reason
            if (x[0]) { showError(''); showInspect(x[1]); } else { failed(x[1].detail); }
          });
      }, function (e) { uploadFailed(f.name + ': could not be read (' + e + ')'); });
    });
  }
  var modeField = form.elements.namedItem('mode');
  if (modeField) { modeField.addEventListener('change', showMode); }
  form.addEventListener('submit', function (e) { e.preventDefault(); run(false); });
  fillCatalogs().then(function () {
    if (applyQuery()) { run(true); }
  });
}());
