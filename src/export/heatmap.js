/*
 * heatmap.js — the source heat map of `strata annotate -f html -o DIR`
 * (embedded by src/export/heatmap.c after the data in index.html).
 *
 * The side list holds the files and the functions, costliest first (with
 * --diff: largest increase first). A file's source comes from files/N.js,
 * loaded with a <script> element the first time it is shown (file://
 * needs no server for that), and is drawn as a table, each line shaded by
 * its self cost relative to the costliest line of the whole profile (with
 * --diff: red for more, blue for less, relative to the largest change).
 * A function shows its costs, callers and callees as links; a line that
 * calls shows what it calls. The location is in the URL's fragment
 * (#file=N&line=L, #func=N), so Back works and a link can be shared.
 *
 * window.strataHeatmap exposes the state for tests and scripting.
 */
(function () {
	'use strict';
	var D = JSON.parse(document.getElementById('strata-data').textContent);
	var KINDS = ['python', 'native', 'jit', 'other'];
	var DIFF = D.diff;
	var cache = {}, loading = {}, cur = { file: -1, func: -1, line: 0 }, rendered = -1;

	/* ---- numbers ---- */
	function pct(v, all) {
		return all > 0 ? (100 * v / all).toFixed(1) + '%' : '0%';
	}
	function count(v) {
		return Math.round(v).toLocaleString('en-US');
	}
	function amount(v) {
		var u = DIFF ? DIFF.unit : 'ns';
		if (u === 'ns') return Math.abs(v) >= 1e9 ? (v / 1e9).toFixed(2) + ' s' : (v / 1e6).toFixed(1) + ' ms';
		if (u === 'bytes') return (v / 1048576).toFixed(1) + ' MiB';
		return count(v) + ' ' + u;
	}
	/* The compared value of a cost: a share of its side's total, or an
	 * amount with --absolute. */
	function val(c, base) {
		if (DIFF && DIFF.absolute) return c * DIFF.scale[base ? 0 : 1];
		var all = base ? D.btotal : D.total;
		return all > 0 ? c / all : 0;
	}
	function change(nw, bs) {
		return val(nw, false) - val(bs, true);
	}
	function fmtChange(d) {
		if (DIFF.absolute) return (d >= 0 ? '+' : '-') + amount(Math.abs(d));
		return (d >= 0 ? '+' : '') + (100 * d).toFixed(1);
	}
	function shade(self, bself) {
		if (DIFF) {
			var d = change(self, bself), t = D.maxdelta > 0 ? Math.min(1, Math.abs(d) / D.maxdelta) : 0;
			if (!t) return '';
			return d > 0 ? 'rgba(220,40,30,' + (0.8 * t).toFixed(3) + ')' : 'rgba(40,90,215,' + (0.8 * t).toFixed(3) + ')';
		}
		if (!self || !(D.maxself > 0)) return '';
		return 'rgba(255,90,20,' + (0.08 + 0.72 * self / D.maxself).toFixed(3) + ')';
	}
	function el(tag, attrs, text) {
		var e = document.createElement(tag);
		for (var k in attrs) if (attrs[k] !== undefined) e.setAttribute(k, attrs[k]);
		if (text !== undefined) e.textContent = text;
		return e;
	}
	function base(path) {
		var k = path.lastIndexOf('/');
		return k >= 0 ? path.slice(k + 1) : path;
	}

	/* ---- calls ---- */
	var callers = D.funcs.map(function () { return []; }), callees = D.funcs.map(function () { return []; });
	D.edges.forEach(function (e) {
		callees[e[0]].push([e[1], e[2]]);
		callers[e[1]].push([e[0], e[2]]);
	});
	callers.forEach(function (l) { l.sort(function (a, b) { return b[1] - a[1]; }); });
	callees.forEach(function (l) { l.sort(function (a, b) { return b[1] - a[1]; }); });

	/* ---- the side list ---- */
	function order(list, selfIdx) {
		var idx = list.map(function (_, i) { return i; });
		idx.sort(function (a, b) {
			var x = list[a], y = list[b];
			var ka = DIFF ? change(x[selfIdx], x[selfIdx + 2]) : x[selfIdx];
			var kb = DIFF ? change(y[selfIdx], y[selfIdx + 2]) : y[selfIdx];
			return kb - ka || (x[0] < y[0] ? -1 : x[0] > y[0] ? 1 : 0);
		});
		return idx;
	}
	function item(href, text, title, v, bv, cls) {
		var li = el('li', { class: cls });
		li.appendChild(el('a', { href: href, title: title }, text));
		var bar = el('span', { class: 'bar' }), fill = el('i');
		var num;
		if (DIFF) {
			var d = change(v, bv), m = D.maxdelta > 0 ? Math.abs(d) / D.maxdelta : 0;
			if (d < 0) fill.className = 'less';
			fill.style.width = (100 * Math.min(1, m)).toFixed(1) + '%';
			num = fmtChange(d);
		} else {
			fill.style.width = (D.total > 0 ? 100 * v / D.total : 0).toFixed(1) + '%';
			num = pct(v, D.total);
		}
		bar.appendChild(fill);
		li.appendChild(bar);
		li.appendChild(el('span', { class: 'num' }, num));
		return li;
	}
	var elFiles = document.getElementById('files'), elFuncs = document.getElementById('funcs');
	/* Files by total (a file's share of the samples), functions by self. */
	order(D.files, 3).forEach(function (i) {
		var f = D.files[i];
		var li = item('#file=' + i, f[0], f[0] + (f[6] === 1 ? ' (new)' : f[6] === 2 ? ' (only in base)' : ''),
			f[3], f[5], 'file');
		li.dataset.idx = i;
		elFiles.appendChild(li);
	});
	/* A function's link reads "name file": <module> and <lambda> need it. */
	order(D.funcs, 4).forEach(function (i) {
		var f = D.funcs[i];
		var li = item('#func=' + i, f[0], f[0] + ' (' + KINDS[f[1]] + (f[2] >= 0 ? ', ' + D.files[f[2]][0] : '') + ')',
			f[4], f[6], 'func');
		if (f[2] >= 0) li.firstChild.appendChild(el('small', { class: 'in' }, ' ' + base(D.files[f[2]][0])));
		li.dataset.idx = i;
		elFuncs.appendChild(li);
	});
	function tab(files) {
		document.getElementById('tab-files').className = files ? 'on' : '';
		document.getElementById('tab-funcs').className = files ? '' : 'on';
		elFiles.hidden = !files;
		elFuncs.hidden = files;
	}
	document.getElementById('tab-files').addEventListener('click', function () { tab(true); });
	document.getElementById('tab-funcs').addEventListener('click', function () { tab(false); });
	document.getElementById('filter').addEventListener('input', function (ev) {
		var q = ev.target.value.toLowerCase();
		[elFiles, elFuncs].forEach(function (ol) {
			Array.prototype.forEach.call(ol.children, function (li) {
				li.hidden = q && li.firstChild.textContent.toLowerCase().indexOf(q) < 0;
			});
		});
	});

	/* ---- a function ---- */
	function funcLink(j) {
		var f = D.funcs[j];
		return el('a', { href: '#func=' + j, title: KINDS[f[1]] + (f[2] >= 0 ? ' ' + D.files[f[2]][0] : '') }, f[0]);
	}
	function costText(self, total, bself, btotal) {
		var s = 'self ' + pct(self, D.total) + ' (' + count(self) + ' ' + D.event + '), total ' + pct(total, D.total);
		if (!DIFF) return s;
		var r = val(bself, true) > 0 ? ', x' + (val(self, false) / val(bself, true)).toFixed(2) : self ? ', new' : '';
		return 'new: ' + s + '; base: self ' + pct(bself, D.btotal) + ', total ' + pct(btotal, D.btotal) +
			'; change of self ' + fmtChange(change(self, bself)) + (DIFF.absolute ? '' : ' points') + r;
	}
	function showFunc(j) {
		var sec = document.getElementById('func'), f = D.funcs[j];
		sec.innerHTML = '';
		if (j < 0) {
			sec.hidden = true;
			return;
		}
		var h = el('h2', {}, f[0]);
		h.appendChild(el('span', { class: 'kind' }, KINDS[f[1]] + (f[8] === 1 ? ', new' : f[8] === 2 ? ', only in base' : '')));
		sec.appendChild(h);
		if (f[2] >= 0) {
			var p = el('p', { class: 'where' });
			p.appendChild(el('a', { href: '#file=' + f[2] + '&line=' + f[3] }, D.files[f[2]][0] + ':' + f[3]));
			sec.appendChild(p);
		}
		sec.appendChild(el('p', { class: 'cost' }, costText(f[4], f[5], f[6], f[7])));
		[['Callers', callers[j], 'callers'], ['Callees', callees[j], 'callees']].forEach(function (x) {
			sec.appendChild(el('h3', {}, x[0] + (x[1].length ? '' : ': none')));
			var ul = el('ul', { class: x[2] });
			x[1].forEach(function (c) {
				var li = el('li');
				li.appendChild(funcLink(c[0]));
				li.appendChild(document.createTextNode(' ' + pct(c[1], D.total)));
				ul.appendChild(li);
			});
			sec.appendChild(ul);
		});
		sec.hidden = false;
	}

	/* ---- a file ---- */
	var elCode = document.getElementById('code'), elHead = document.getElementById('filehead');
	window.strataHeatmapFile = function (i, data) {
		cache[i] = data;
		if (cur.file === i) renderFile();
	};
	function load(i) {
		if (cache[i] || loading[i]) return;
		loading[i] = true;
		var s = el('script', { src: 'files/' + i + '.js' });
		s.onerror = function () {
			elHead.textContent = 'Could not load files/' + i + '.js: the heat map directory is incomplete.';
		};
		document.body.appendChild(s);
	}
	function renderFile() {
		var i = cur.file, f = D.files[i], d = cache[i];
		if (i < 0 || !d) return;
		elHead.textContent = f[0] + ' ';
		elHead.appendChild(el('span', {}, costText(f[2], f[3], f[4], f[5])));
		document.getElementById('nosrc').hidden = !!d.src;
		var byLine = {}, calls = {};
		d.lines.forEach(function (l) { byLine[l[0]] = l; });
		d.calls.forEach(function (c) { (calls[c[0]] = calls[c[0]] || []).push(c); });
		var rows = document.createDocumentFragment(), head = el('tr');
		head.appendChild(el('th', {}, 'line'));
		(DIFF ? ['base', 'new', 'change'] : ['self', 'total']).forEach(function (t) { head.appendChild(el('th', {}, t)); });
		head.appendChild(el('th', { class: 'src' }, 'source'));
		rows.appendChild(head);
		var n = d.src ? d.src.length : 0, lines = [];
		for (var ln = 1; ln <= n; ln++) lines.push(ln);
		if (!d.src) d.lines.forEach(function (l) { lines.push(l[0]); });
		else d.lines.forEach(function (l) { if (l[0] > n) lines.push(l[0]); });
		lines.forEach(function (ln) {
			var l = byLine[ln], tr = el('tr', { id: 'L' + ln });
			var a = el('a', { href: '#file=' + i + '&line=' + ln }, String(ln)), td = el('td', { class: 'ln' });
			td.appendChild(a);
			tr.appendChild(td);
			if (DIFF) {
				tr.appendChild(el('td', { class: 'n' }, l && (l[3] || l[1]) ? pct(l[3], D.btotal) : ''));
				tr.appendChild(el('td', { class: 'n' }, l && (l[3] || l[1]) ? pct(l[1], D.total) : ''));
				tr.appendChild(el('td', { class: 'n' }, l && (l[3] || l[1]) ? fmtChange(change(l[1], l[3])) : ''));
			} else {
				tr.appendChild(el('td', { class: 'n' }, l && l[1] ? pct(l[1], D.total) : ''));
				tr.appendChild(el('td', { class: 'n' }, l && l[2] ? pct(l[2], D.total) : ''));
			}
			var src = el('td', { class: 'src' }, d.src && ln <= n ? d.src[ln - 1] : '');
			if (l && l[5]) src.appendChild(el('span', { class: 'jit', title: 'ran as JIT-compiled code' }, 'JIT'));
			(calls[ln] || []).sort(function (x, y) { return y[2] - x[2]; }).forEach(function (c) {
				var chip = el('span', { class: 'call' });
				chip.appendChild(document.createTextNode('\u2192 '));
				chip.appendChild(funcLink(c[1]));
				chip.appendChild(document.createTextNode(' ' + pct(c[2], D.total)));
				src.appendChild(chip);
			});
			if (l) tr.style.backgroundColor = shade(l[1], l[3]);
			tr.appendChild(src);
			rows.appendChild(tr);
		});
		elCode.innerHTML = '';
		elCode.appendChild(rows);
		rendered = i;
		Array.prototype.forEach.call(elFiles.children, function (li) { li.classList.toggle('cur', +li.dataset.idx === i); });
		mark();
	}
	function mark() {
		var old = elCode.querySelector('tr.target');
		if (old) old.classList.remove('target');
		var tr = cur.line ? document.getElementById('L' + cur.line) : null;
		if (tr) {
			tr.classList.add('target');
			tr.scrollIntoView({ block: 'center' });
		} else {
			window.scrollTo(0, 0);
		}
	}
	function openFile(i, line) {
		if (i !== cur.file) {
			cur.file = i;
			rendered = -1;
			elCode.innerHTML = '';
			elHead.textContent = D.files[i][0] + ' (loading)';
		}
		cur.line = line || 0;
		if (cache[i]) {
			if (rendered !== i) renderFile();
			else mark();
		} else {
			load(i);
		}
	}

	/* ---- navigation ---- */
	function route() {
		var h = {};
		location.hash.replace(/^#/, '').split('&').forEach(function (kv) {
			var p = kv.split('=');
			if (p[0]) h[p[0]] = +p[1];
		});
		if (h.func >= 0 && h.func < D.funcs.length) {
			var f = D.funcs[h.func];
			cur.func = h.func;
			showFunc(h.func);
			Array.prototype.forEach.call(elFuncs.children, function (li) { li.classList.toggle('cur', +li.dataset.idx === h.func); });
			if (f[2] >= 0) openFile(f[2], f[3]);
		} else if (h.file >= 0 && h.file < D.files.length) {
			openFile(h.file, h.line);
		} else if (D.files.length) {
			openFile(+elFiles.firstChild.dataset.idx, 0);
		}
	}
	window.addEventListener('hashchange', route);

	document.getElementById('title').textContent = D.title;
	document.title = 'strata heat map: ' + D.title;
	var sum = count(D.total) + ' ' + D.event + ' in ' + D.files.length + ' source file' +
		(D.files.length === 1 ? '' : 's') + ', ' + D.funcs.length + ' functions.';
	if (DIFF) {
		sum += ' Compared with BASE (' + DIFF.title + ', ' + count(D.btotal) + ' ' + D.event + '): lines shaded by the ' +
			'change of their self ' + (DIFF.absolute ? 'amount' : 'share') + ', red more, blue less.';
	} else {
		sum += ' Lines shaded by their self cost; hottest: ' + pct(D.maxself, D.total) + '.';
	}
	document.getElementById('summary').textContent = sum;
	if (!location.hash && D.start) location.hash = D.start.func !== undefined ? '#func=' + D.start.func : '#file=' + D.start.file;
	else route();

	window.strataHeatmap = {
		state: function () {
			return { file: cur.file >= 0 ? D.files[cur.file][0] : null, rendered: rendered === cur.file && cur.file >= 0,
				func: cur.func >= 0 && !document.getElementById('func').hidden ? D.funcs[cur.func][0] : null,
				line: cur.line, diff: !!DIFF };
		},
		/* The background drawn behind line ln of the file shown. */
		shade: function (ln) {
			var tr = document.getElementById('L' + ln);
			return tr ? getComputedStyle(tr).backgroundColor : null;
		},
		funcIndex: function (name) {
			for (var j = 0; j < D.funcs.length; j++) if (D.funcs[j][0] === name) return j;
			return -1;
		},
		fileIndex: function (end) {
			for (var j = 0; j < D.files.length; j++) if (D.files[j][0].slice(-end.length) === end) return j;
			return -1;
		},
	};
})();
