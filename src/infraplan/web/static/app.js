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
  var uploaded = null;  // {name, config} of an uploaded config.json (kept in memory only)

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
    if (type === 'list') { return Array.isArray(v) ? v : v.split(','); }
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
    return q.toString();
  }
  function applyQuery() {
    var q = new URLSearchParams(window.location.search);
    var any = false;
    if (q.has('mode')) { setValue(form.elements.namedItem('mode'), q.get('mode')); }
    showMode();
    fields().forEach(function (el) {
      if (q.has(el.name)) { setValue(el, q.get(el.name)); any = true; }
    });
    return any;
  }
  function fillCatalogs() {
    var selects = form.querySelectorAll('select[data-catalog]');
    return Promise.all(Array.prototype.map.call(selects, function (el) {
      return fetch('/api/catalog/' + el.getAttribute('data-catalog'))
        .then(function (r) { return r.json(); })
        .then(function (rows) {
          var wanted = (el.getAttribute('data-default') || '').split(',');
          rows.forEach(function (row) {
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
      ['KV cache per token (bf16)',
        (a.kv_cache_bytes_per_token.bf16 / 1024).toFixed(1) + ' KiB']];
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
  function run() {
    showError('');
    var url = form.getAttribute('data-endpoint');
    var inspecting = form.hasAttribute('data-inspect');
    var payload = body();
    if (!uploaded) { history.replaceState(null, '', '?' + query()); }
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
          showError(typeof answer.data.detail === 'string' ? answer.data.detail
            : JSON.stringify(answer.data.detail));
          statusBox.textContent = '';
          return;
        }
        if (inspecting) {
          showInspect(answer.data);
        } else {
          result.innerHTML = answer.data.html;  // escaped by the server
          infraplanDraw(result, answer.data.document.figures);
          if (window.innerWidth < 600) { result.scrollIntoView(); }  // the form is long
        }
        statusBox.textContent = 'done in ' + ((Date.now() - started) / 1000).toFixed(1) + ' s';
        form.setAttribute('data-done', String(Date.now()));
      })
      .catch(function (e) { showError(String(e)); statusBox.textContent = ''; })
      .finally(function () { button.disabled = false; });
  }
  var file = document.getElementById('config-file');
  if (file) {
    file.addEventListener('change', function () {
      var f = file.files[0];
      if (!f) { uploaded = null; return; }
      f.text().then(function (text) {
        var config;
        try { config = JSON.parse(text); } catch (e) {
          showError(f.name + ': not valid JSON (' + e.message + ')');
          return;
        }
        uploaded = {name: f.name.replace(/\.json$/, ''), config: config};
        var seq = form.elements.namedItem('seq_len');
        return fetch('/api/models/inspect', {method: 'POST',
          headers: {'content-type': 'application/json'},
          body: JSON.stringify({config: config, name: uploaded.name,
                                seq_len: seq ? Number(seq.value) || 4096 : 4096})})
          .then(function (r) { return r.json().then(function (d) { return [r.ok, d]; }); })
          .then(function (x) {
            if (x[0]) { showError(''); showInspect(x[1]); } else { showError(x[1].detail); }
          });
      });
    });
  }
  var modeField = form.elements.namedItem('mode');
  if (modeField) { modeField.addEventListener('change', showMode); }
  form.addEventListener('submit', function (e) { e.preventDefault(); run(); });
  fillCatalogs().then(function () {
    if (applyQuery()) { run(); }
  });
}());
