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
    if (el.tagName === 'SELECT') {
      // a value that is not a choice (a link's typo) stays in view, marked, until changed
      el.querySelectorAll('option[data-link]').forEach(function (o) { o.remove(); });
      var wanted = el.multiple ? text.split(',') : [text];
      var names = Array.prototype.map.call(el.options, function (o) { return o.value; });
      wanted.forEach(function (w) {
        if (names.indexOf(w) >= 0) { return; }
        var o = document.createElement('option');
        o.value = o.textContent = w;
        o.setAttribute('data-link', '');
        el.insertBefore(o, el.firstChild);
      });
      Array.prototype.forEach.call(el.options, function (o) {
        o.selected = wanted.indexOf(o.value) >= 0;
      });
      return;
    }
    if (el.type === 'number' && text.trim() && !isFinite(Number(text))) {
      el.type = 'text';  // a number field would drop the text: keep it, to be fixed
    }
    el.value = text;
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
  // edit distance of two strings (for 'did you mean')
  function distance(a, b) {
    var row = [];
    for (var j = 0; j <= b.length; j++) { row.push(j); }
    for (var i = 1; i <= a.length; i++) {
      var diag = row[0];
      row[0] = i;
      for (j = 1; j <= b.length; j++) {
        var up = row[j];
        row[j] = Math.min(row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] === b[j - 1] ? 0 : 1));
        diag = up;
      }
    }
    return row[b.length];
  }
  // the choice closest to `text` (a typo of it), or '' when none is close
  function closest(text, choices) {
    var best = '', score = 0.59;  // difflib's cutoff (0.6), as the library's 'did you mean'
    var key = text.trim().toLowerCase();
    choices.forEach(function (c) {
      var s = 1 - distance(key, c.toLowerCase()) / Math.max(key.length, c.length, 1);
      if (s > score) { best = c; score = s; }
    });
    return best;
  }
  function choicesOf(el) {  // a select's own options, not a link's value put in it
    return Array.prototype.filter.call(el.options, function (o) {
      return o.value && !o.hasAttribute('data-link');
    }).map(function (o) { return o.value; });
  }
  // why `text` cannot be `el`'s value, or '' when it can: the field's label, the value, the
  // choices or the closest one, and the fix
  function problem(el, text) {
    var type = el.getAttribute('data-type');
    var label = labelOf(el);
    var parts = el.multiple || /^list/.test(type) ? text.split(',') : [text];
    if (el.tagName === 'SELECT') {
      if (el.multiple && !text) { return ''; }  // none picked: emptyRequired says so
      var names = choicesOf(el);
      var all = Array.prototype.filter.call(el.options, function (o) {
        return !o.hasAttribute('data-link');
      }).map(function (o) { return o.value; });
      var bad = parts.filter(function (p) { return all.indexOf(p) < 0; });
      if (!bad.length) { return ''; }
      var near = closest(bad[0], names.concat(Object.keys(el.catalogNames || {})));
      near = near && el.catalogNames && el.catalogNames[near] || near;
      return label + ": '" + bad.join(',') + "' is not one of " + (near
        ? "the choices; did you mean '" + near + "'? To fix: pick it, or another, in the list"
        : names.length <= 8 ? names.join(', ') + '; pick one'
          : 'the ' + names.length + ' choices; pick one in the list');
    }
    if (!text.trim()) { return ''; }
    if (type === 'prices') { return pricesProblem(label, text); }
    if (type === 'int' || type === 'float' || type === 'list-int') {
      var whole = type !== 'float';
      var wrong = parts.filter(function (p) {
        var n = Number(p);
        return !p.trim() || !isFinite(n) || (whole && !Number.isInteger(n));
      });
      if (wrong.length) {
        var example = type === 'list-int' ? '1,2,4' : el.defaultValue || el.placeholder ||
          (whole ? '1' : '0.5');
        return label + ": '" + (wrong[0].trim() || text) + "' is not " +
          (whole ? 'a whole number' : 'a number') + '; use e.g. ' + example;
      }
    }
    if (type === 'list' && parts.some(function (p) { return !p.trim(); })) {
      return label + ": '" + text + "' has an empty item; separate names with one comma, " +
        'e.g. ' + (el.placeholder || 'a,b');
    }
    return '';
  }
  // the price field (web/prices.py, which words the same checks the same way): one number
  // for every accelerator chosen, or name=price pairs naming some of them
  var NUMBER = '[+-]?(?:\\d+\\.?\\d*|\\.\\d+)(?:[eE][+-]?\\d+)?';
  var PRICE_FORMS = 'one number for every accelerator (2.50) or name=price pairs ' +
    '(h100=2.50, a100=1.60)';
  function withFix(message, fix) {
    return message + (/[?.!]$/.test(message) ? ' ' : '. ') + 'To fix: ' + fix;
  }
  function pricesProblem(label, text) {
    var accel = fields().filter(function (f) {
      return f.getAttribute('data-catalog') === 'gpus' && active(f);
    })[0];
    var names = accel && accel.catalogNames || {};
    var chosen = accel ? [].concat(values(accel)) : [];
    var t = text.trim();
    var single = new RegExp('^' + NUMBER + '$').test(t);
    var parts = single ? [t] : t.split(',').filter(
      function (p) { return p.trim(); });
    var pair = new RegExp('^\\s*([^=\\s][^=]*?)\\s*=\\s*(' + NUMBER + ')\\s*$');
    var seen = {};
    for (var i = 0; i < parts.length; i++) {
      var item = parts[i].trim();
      var m = single ? [t, null, t] : pair.exec(parts[i]);
      if (!m) {
        return withFix(label + ": '" + item + "' is not a price or a name=price pair",
                       'give USD per GPU-hour, ' + PRICE_FORMS);
      }
      var price = Number(m[2]);
      if (!(price > 0 && price <= 1000)) {
        return withFix(label + ": '" + item + "': a price is above $0 and at most $1,000 " +
                       'per GPU-hour', 'give the USD you pay per GPU-hour, e.g. 2.50');
      }
      if (m[1] === null) { return ''; }
      var name = names[m[1].toLowerCase()];
      if (!name) {
        var near = closest(m[1], Object.keys(names));
        var rows = choicesOf(accel || {options: []}).sort();
        return withFix(label + ": '" + item + "': unknown accelerator '" + m[1] + "'; " +
          (near ? "did you mean '" + names[near] + "'?" : 'valid choices: ' +
            rows.slice(0, 12).join(', ') + (rows.length > 12 ? ', ...' : '')),
          'name an accelerator of the list (or its alias)');
      }
      if (chosen.length && chosen.indexOf(name) < 0) {
        return withFix(label + ": '" + item + "': " + name + ' is not among the ' +
                       'accelerators chosen (' + chosen.join(', ') + ')',
                       'pick ' + name + ' in the accelerators too, or drop its price');
      }
      if (seen[name]) {
        return withFix(label + ": '" + seen[name] + "' and '" + item + "' price the same " +
                       'accelerator (' + name + ')', 'keep one of them');
      }
      seen[name] = item;
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
  // fills the form from the address bar; says which of the link's values it left out.
  // `kept`: the upload in memory still serves a link that names it (Back to an earlier run)
  function applyQuery(kept) {
    var q = new URLSearchParams(window.location.search);
    var any = false;
    var ignored = [];
    var byName = {};
    fields().forEach(function (el) { byName[el.name] = el; });
    var upload = modelField && file ? q.get(UPLOAD_KEY) : null;
    if (kept && upload !== null && uploaded && uploaded.name === upload) {
      q.delete(UPLOAD_KEY);
      upload = null;
      setUpload(uploaded);  // its entry in the model select, chosen again
    }
    q.forEach(function (text, name) {
      if (upload !== null && name === UPLOAD_KEY) { return; }
      var el = byName[name];
      if (!el) {
        var near = closest(name, Object.keys(byName));
        ignored.push(name + '=' + text + ' (not a field of this page' +
          (near ? "; did you mean '" + near + "'?" : '') + ')');
        return;
      }
      setValue(el, canonical(el, text));  // a bad value too: it is marked, not replaced
      any = true;
    });
    showMode();
    // a value the link asked for that cannot be used: shown in its field, and nothing runs
    if (invalid().length) { any = false; }
    var notes = ignored.length ? ['ignored from the link: ' + ignored.join('; ') +
      '. To fix: correct the link, or press the button to run without them'] : [];
    if (ignored.length) { any = false; }
    // a bad value in a field of the other mode (serve: plan / simulate) does not stop this
    // mode's run: it is named here, and refused if that mode is picked
    var unused = fields().filter(function (el) {
      return !active(el) && q.has(el.name);
    }).map(function (el) {
      var v = values(el);
      return problem(el, Array.isArray(v) ? v.join(',') : v);
    }).filter(Boolean);
    if (unused.length) {
      notes.push('not used by ' + mode() + ' (and not valid): ' + unused.join('; '));
    }
    if (upload !== null) {
      // nothing runs until the file is back: the catalog default is not the linked model
      setUpload(null, missingUpload(upload), 'upload ' + upload + ' again');
      notes.unshift(missingUpload(upload));
      any = false;
    }
    showNotice(notes.join('. '));
    if (!any) { refuse(invalid()); }
    return any;
  }
  // the active fields whose value cannot be sent, each with why: [[el, message], ...]
  function invalid() {
    return fields().filter(function (el) {
      return active(el) && el.getAttribute('data-type') !== 'skip' || el.name === 'mode';
    }).map(function (el) {
      var v = values(el);
      return [el, problem(el, Array.isArray(v) ? v.join(',') : v)];
    }).filter(function (x) { return x[1]; });
  }
  // shows why a run cannot go: in the error box, each beside its field; true if any
  function refuse(bad) {
    if (!bad.length) { return false; }
    failed(bad.map(function (x) { return x[1]; }).join('; '));
    bad.forEach(function (x) { mark(x[0], x[1]); });
    return true;
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
            // the default too, so that a form reset (Back: popstate) restores it
            o.selected = o.defaultSelected = wanted.indexOf(row.name) >= 0;
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
  // the API's message in the form's terms, each part beside the field it is about ('tp=3
  // ...', 'min_count 64 ...', 'traffic.cv: ...', 'tp.1: ...' an item of a list): a part
  // that opens with a field's request path opens with its label instead
  function markDetail(detail) {
    var byPath = {};
    fields().forEach(function (el) {
      if (!active(el)) { return; }
      var key = el.getAttribute('data-key') || el.name;
      var group = el.getAttribute('data-group');
      byPath[group ? group + '.' + key : key] = el;
    });
    return detail.split('; ').map(function (part) {
      var m = /^([A-Za-z_][\w.]*?)(\.\d+)?(:\s*|=|\s)/.exec(part);
      var el = m && Object.prototype.hasOwnProperty.call(byPath, m[1]) ? byPath[m[1]] : null;
      if (!el) { return part; }
      if (m[3].charAt(0) === ':') {  // pydantic's wording, in the library's voice
        part = labelOf(el) + ': ' + part.slice(m[0].length)
          .replace(/^Input should be /, 'must be ').replace(/^List should /, 'should ');
      }
      if (!el.closest('label.invalid')) { mark(el, part); }
      return part;
    }).join('; ');
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
  // a table's text wraps at spaces only: a hyphenated token ('h100-sxm5-80gb',
  // 'GPU-hours'), which a browser breaks after a hyphen, is kept whole in a span.nobr
  function keepTokens(root) {
    root.querySelectorAll('td:not(.num), th').forEach(function (cell) {
      var walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
      var nodes = [];
      while (walker.nextNode()) { nodes.push(walker.currentNode); }
      nodes.forEach(function (node) {
        if (!/\S-|-\S/.test(node.data)) { return; }
        var parts = document.createDocumentFragment();
        node.data.split(/(\S*-\S*)/).forEach(function (part, i) {
          if (!part) { return; }
          var piece = document.createTextNode(part);
          if (i % 2) {
            var span = document.createElement('span');
            span.className = 'nobr';
            span.appendChild(piece);
            piece = span;
          }
          parts.appendChild(piece);
        });
        node.parentNode.replaceChild(parts, node);
      });
    });
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
    var bad = invalid();
    if (bad.length) {
      refuse(bad);
      bad[0][0].focus();
      return Promise.resolve();
    }
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
    // the address bar is what runs now, so that a copied link shares it; a new run is a
    // new history entry (Back returns to the run before), the same one replaces its own
    var search = '?' + query();
    if (search === window.location.search) {
      history.replaceState(null, '', search);
    } else {
      history.pushState(null, '', search);
    }
    var ticket = ++runs;
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
        if (ticket !== runs) { return; }  // a later run (Back, Forward) owns the page now
        if (!answer.ok) {
          var detail = answer.data.detail;
          if (typeof detail !== 'string') { detail = JSON.stringify(detail); }
          failed(detail);
          showError(markDetail(detail));  // marks stay: showError('') alone unmarks
          return;
        }
        if (inspecting) {
          showInspect(answer.data);
        } else {
          result.innerHTML = answer.data.html;  // escaped by the server
          keepTokens(result);
          showFixes(answer.data.document.apply);
          infraplanDraw(result, answer.data.document.figures);
          if (window.innerWidth < 600) { result.scrollIntoView(); }  // the form is long
        }
        statusBox.textContent = 'done in ' + ((Date.now() - started) / 1000).toFixed(1) + ' s';
        form.setAttribute('data-done', String(Date.now()));
      })
      .catch(function (e) { if (ticket === runs) { failed(String(e)); } })
      .finally(function () { if (ticket === runs) { button.disabled = false; } });
  }
  var runs = 0;  // the latest run's number: an earlier run's late answer is dropped
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
  // a link's bad value leaves its select once another choice is picked
  form.addEventListener('change', function (e) {
    if (e.target.tagName !== 'SELECT') { return; }
    e.target.querySelectorAll('option[data-link]').forEach(function (o) {
      if (!o.selected) { o.remove(); }
    });
  });
  form.addEventListener('submit', function (e) { e.preventDefault(); run(false); });
  // Back and Forward: the form as that entry's address has it, and its run again (an
  // address with no settings, the page as first opened: the defaults, no answer)
  window.addEventListener('popstate', function () {
    runs++;  // an answer still on its way belongs to another entry
    form.querySelector('button[type=submit]').disabled = false;
    form.reset();
    form.querySelectorAll('option[data-link]').forEach(function (o) { o.remove(); });
    var keep = uploaded;
    if (!new URLSearchParams(window.location.search).has(UPLOAD_KEY)) {
      setUpload(null);
      if (file) { file.value = ''; }
    }
    showError('');
    showNotice('');
    clearAnswers();
    statusBox.textContent = '';
    if (applyQuery(Boolean(keep))) { run(true); }
  });
  fillCatalogs().then(function () {
    if (applyQuery()) { run(true); }
  });
}());
