/*
 * flame.js — the interactive flame graph of `strata convert -f html`
 * (embedded by src/export/html.c after the page's data, flame.html).
 *
 * Data (see html.c): funcs, frames, nodes (parents first), procs, and per
 * thread the self cost of each leaf node. Everything else is computed
 * here: the tree shown (per line, or merged per function), the totals of
 * the selected thread / process / all, and the layout.
 *
 * Drawing is on one canvas and only frames at least MIN_PX wide are
 * drawn, so the work per frame is bounded by the window, not by the size
 * of the profile. The root is at the top (an icicle): the zoomed frame
 * spans the full width, its ancestors are drawn above it, faded.
 *
 * With convert --diff BASE the data also holds BASE's tree (html.c): it is
 * laid on the tree shown, node by node along the same path of lines (or
 * of functions, merged), for the threads of BASE that match the selection
 * by name, and every frame is coloured by the change of its self share
 * (or amount): red more, blue less, neutral when about the same.
 *
 * window.strataFlame exposes the state and the drawn boxes for tests and
 * for scripting (find(text) gives a frame's box in page coordinates).
 */
(function () {
	'use strict';
	var D = JSON.parse(document.getElementById('strata-data').textContent);
	var KINDS = ['python', 'native', 'jit', 'other'];
	var ROW = 18, MIN_PX = 0.4, MAX_CANVAS = 30000;
	var DIFF = D.diff || null;
	var FUNCS = DIFF ? D.funcs.concat(D.bfuncs) : D.funcs;

	var nNodes = D.nodes.length / 2, nFrames = D.frames.length / 2;
	var nodeParent = new Int32Array(nNodes), nodeFrame = new Int32Array(nNodes);
	for (var i = 0; i < nNodes; i++) {
		nodeParent[i] = D.nodes[2 * i];
		nodeFrame[i] = D.nodes[2 * i + 1];
	}
	var frameFunc = new Int32Array(nFrames), frameLine = new Int32Array(nFrames);
	for (i = 0; i < nFrames; i++) {
		frameFunc[i] = D.frames[2 * i];
		frameLine[i] = D.frames[2 * i + 1];
	}
	function base(path) {
		var k = path.lastIndexOf('/');
		return k >= 0 && k + 1 < path.length ? path.slice(k + 1) : path;
	}
	/* Labels as strata's other formats write them (src/export/labels.c). */
	function funcLabel(fu, line) {
		var f = FUNCS[fu], name = f[0], file = f[1], kind = f[2], mod = f[3];
		if (kind === 3) return name;
		if (file && line > 0) return name + ' (' + base(file) + ':' + line + ')';
		if (file) return name + ' (' + base(file) + ')';
		if (mod) return name + ' (' + mod + ')';
		return name;
	}

	/* ---- BASE (convert --diff): its nodes, and a class per (function, line)
	 * shared by both trees, to find BASE's nodes in the tree shown ---- */
	var nBNodes = DIFF ? D.bnodes.length / 2 : 0, nBFrames = DIFF ? D.bframes.length / 2 : 0;
	var bnodeParent = new Int32Array(nBNodes), bnodeFrame = new Int32Array(nBNodes);
	var bframeFunc = new Int32Array(nBFrames), frameClass = new Int32Array(nFrames), bframeClass = new Int32Array(nBFrames);
	var nClasses = 0;
	if (DIFF) {
		var classes = new Map();
		var classOf = function (fu, line) {
			var key = fu + ':' + line, c = classes.get(key);
			if (c === undefined) classes.set(key, c = nClasses++);
			return c;
		};
		for (i = 0; i < nFrames; i++) frameClass[i] = classOf(frameFunc[i], frameLine[i]);
		for (i = 0; i < nBFrames; i++) {
			bframeFunc[i] = D.bframes[2 * i];
			bframeClass[i] = classOf(bframeFunc[i], D.bframes[2 * i + 1]);
		}
		for (i = 0; i < nBNodes; i++) {
			bnodeParent[i] = D.bnodes[2 * i];
			bnodeFrame[i] = D.bnodes[2 * i + 1];
		}
	}

	/* ---- the tree shown: per line (the model's nodes) or per function ---- */
	var byFunc = false;
	var V; /* {n, parent, key, depth, label, func, line, of: model node -> view node} */
	function buildView() {
		var of = new Int32Array(nNodes), parent = [], key = [], depth = [];
		var index = new Map();
		parent.push(-1); key.push(-1); depth.push(0);
		of[0] = 0;
		for (var n = 1; n < nNodes; n++) {
			var vp = of[nodeParent[n]], fr = nodeFrame[n];
			var k = byFunc ? frameFunc[fr] : fr;
			var id = vp * (byFunc ? FUNCS.length : nFrames) + k;
			var v = index.get(id);
			if (v === undefined) {
				v = parent.length;
				index.set(id, v);
				parent.push(vp);
				key.push(k);
				depth.push(depth[vp] + 1);
			}
			of[n] = v;
		}
		var nv = parent.length, label = new Array(nv), func = new Int32Array(nv), line = new Int32Array(nv);
		label[0] = 'all';
		func[0] = -1;
		for (var w = 1; w < nv; w++) {
			func[w] = byFunc ? key[w] : frameFunc[key[w]];
			line[w] = byFunc ? 0 : frameLine[key[w]];
			label[w] = funcLabel(func[w], line[w]);
		}
		V = { n: nv, key: Int32Array.from(key), parent: Int32Array.from(parent), depth: Int32Array.from(depth), label: label, func: func,
			line: line, of: of, bof: null };
		if (DIFF) mapBase();
	}
	/* V.bof: BASE node -> the node shown with the same path of (function,
	 * line) classes, or of functions when merged; -1 when there is none. */
	function mapBase() {
		var kc = byFunc ? FUNCS.length : nClasses, index = new Map(), w;
		for (w = V.n - 1; w > 0; w--) {
			var k = byFunc ? V.func[w] : frameClass[V.key[w]];
			index.set(V.parent[w] * kc + k, w);
		}
		var bof = new Int32Array(nBNodes);
		for (var b = 1; b < nBNodes; b++) {
			var vp = bof[bnodeParent[b]], fr = bnodeFrame[b];
			var x = vp < 0 ? undefined : index.get(vp * kc + (byFunc ? bframeFunc[fr] : bframeClass[fr]));
			bof[b] = x === undefined ? -1 : x;
		}
		V.bof = bof;
	}

	/* ---- totals and children of the current selection ---- */
	var sel = 'all', total, childStart, children, maxDepth;
	/* --diff: self of the selection on both sides, BASE's totals, the
	 * change per node, and what of BASE has no node here */
	var selfNew, selfBase, totalBase, delta, maxDelta, baseAll, baseUnmatched, baseThreads = [];
	var diffBy = DIFF && DIFF.absolute ? 'amount' : 'share';
	function selectedThreads() {
		var out = [];
		D.threads.forEach(function (t, i) {
			if (sel === 'all' || sel === 't' + i || sel === 'p' + t.proc) out.push(t);
		});
		return out;
	}
	/* BASE's threads for the selection: all; the process of the same name;
	 * the thread of the same name in it. */
	function selectedBaseThreads() {
		if (!DIFF) return [];
		var want = null, proc = null;
		if (sel[0] === 'p') proc = D.procs[+sel.slice(1)][2];
		if (sel[0] === 't') {
			var t = D.threads[+sel.slice(1)];
			want = t.key;
			proc = D.procs[t.proc][2];
		}
		return D.bthreads.filter(function (b) {
			return (proc === null || D.bprocs[b.proc][0] === proc) && (want === null || b.key === want);
		});
	}
	function computeDiff() {
		selfBase = new Float64Array(V.n);
		baseAll = 0;
		baseUnmatched = 0;
		baseThreads = selectedBaseThreads();
		baseThreads.forEach(function (t) {
			var s = t.self;
			for (var k = 0; k < s.length; k += 2) {
				var v = V.bof[s[k]];
				baseAll += s[k + 1];
				if (v > 0) selfBase[v] += s[k + 1];
				else baseUnmatched += s[k + 1];
			}
		});
		totalBase = Float64Array.from(selfBase);
		for (var v = V.n - 1; v > 0; v--) totalBase[V.parent[v]] += totalBase[v];
		delta = new Float64Array(V.n);
		maxDelta = 0;
		for (v = 1; v < V.n; v++) {
			delta[v] = diffValue(selfNew[v], 1) - diffValue(selfBase[v], 0);
			if (total[v] > 0 && Math.abs(delta[v]) > maxDelta) maxDelta = Math.abs(delta[v]);
		}
	}
	/* A cost of one side as compared: a share of that side's total, or an
	 * amount (cost times the side's unit). */
	function diffValue(c, side) {
		if (diffBy === 'amount') return c * DIFF.scale[side ? 1 : 0];
		var all = side ? total[0] : baseAll;
		return all > 0 ? c / all : 0;
	}
	function computeTotals() {
		total = new Float64Array(V.n);
		selectedThreads().forEach(function (t) {
			var s = t.self;
			for (var k = 0; k < s.length; k += 2) total[V.of[s[k]]] += s[k + 1];
		});
		if (DIFF) selfNew = Float64Array.from(total);
		for (var v = V.n - 1; v > 0; v--) total[V.parent[v]] += total[v];
		if (DIFF) computeDiff();
		var count = new Int32Array(V.n + 1);
		maxDepth = 0;
		for (v = 1; v < V.n; v++) {
			if (!total[v]) continue;
			count[V.parent[v] + 1]++;
			if (V.depth[v] > maxDepth) maxDepth = V.depth[v];
		}
		for (v = 0; v < V.n; v++) count[v + 1] += count[v];
		childStart = count.slice();
		children = new Int32Array(count[V.n]);
		var fill = count.slice();
		for (v = 1; v < V.n; v++) if (total[v]) children[fill[V.parent[v]]++] = v;
		/* Heaviest first ("left heavy"), ties by label so the order is stable. */
		for (v = 0; v < V.n; v++) {
			var a = childStart[v], b = childStart[v + 1];
			if (b - a > 1) {
				var part = Array.prototype.slice.call(children, a, b);
				part.sort(function (x, y) {
					return total[y] - total[x] || (V.label[x] < V.label[y] ? -1 : V.label[x] > V.label[y] ? 1 : 0);
				});
				for (var k = 0; k < part.length; k++) children[a + k] = part[k];
			}
		}
	}

	/* ---- formatting ---- */
	function fmtCost(c) {
		var s = Math.round(c).toLocaleString('en-US') + ' ' + D.event;
		if (D.period_ns > 0) {
			var ns = c * D.period_ns;
			s += ns >= 1e9 ? ' (' + (ns / 1e9).toFixed(2) + ' s)' : ' (' + (ns / 1e6).toFixed(1) + ' ms)';
		}
		return s;
	}
	function pct(a, b) {
		return b > 0 ? (100 * a / b).toFixed(2) + '%' : '0%';
	}
	function fmtAmount(v) {
		var u = DIFF.unit;
		if (u === 'ns') return v >= 1e9 ? (v / 1e9).toFixed(2) + ' s' : (v / 1e6).toFixed(1) + ' ms';
		if (u === 'bytes') return v >= 1048576 ? (v / 1048576).toFixed(1) + ' MiB' : (v / 1024).toFixed(1) + ' KiB';
		return Math.round(v).toLocaleString('en-US') + ' ' + u;
	}
	/* "+3.20 points" of share, or "+12.0 ms". */
	function fmtChange(d) {
		if (diffBy === 'amount') return (d >= 0 ? '+' : '-') + fmtAmount(Math.abs(d));
		return (d >= 0 ? '+' : '') + (100 * d).toFixed(2) + ' points';
	}
	/* The diverging colour of a change t in [-1, 1]: neutral at 0. */
	function diffColor(t) {
		var n = [226, 226, 220], c = t > 0 ? [220, 40, 30] : [40, 90, 215], a = Math.min(1, Math.abs(t));
		return 'rgb(' + Math.round(n[0] + (c[0] - n[0]) * a) + ',' + Math.round(n[1] + (c[1] - n[1]) * a) + ',' +
			Math.round(n[2] + (c[2] - n[2]) * a) + ')';
	}

	/* ---- drawing ---- */
	var canvas = document.getElementById('flame'), ctx = canvas.getContext('2d');
	var zoom = 0, history = [], matchRe = null, matched = null, hoverNode = -1;
	var rows = []; /* per depth: drawn boxes [x, w, node, ...] in CSS pixels, left to right */
	var charW = 7;
	function hash(s) {
		var h = 2166136261;
		for (var k = 0; k < s.length; k++) h = Math.imul(h ^ s.charCodeAt(k), 16777619);
		return h >>> 0;
	}
	function color(v) {
		if (v === 0) return '#c8c8c0';
		if (matched && matched[v]) return '#e040fb';
		if (DIFF) return diffColor(maxDelta > 0 ? delta[v] / maxDelta : 0);
		var f = V.func[v], kind = FUNCS[f][2], h = hash(FUNCS[f][0]), a = h % 55, b = (h >>> 8) % 55;
		if (kind === 0) return 'rgb(' + (200 + a) + ',' + (100 + 2 * b) + ',' + (40 + (a >> 1)) + ')';
		if (kind === 1) return 'rgb(' + (80 + a) + ',' + (130 + b) + ',' + (200 + (a >> 1)) + ')';
		if (kind === 2) return 'rgb(' + (70 + a) + ',' + (180 + (b >> 1)) + ',' + (80 + a) + ')';
		var g = 170 + (a >> 1);
		return 'rgb(' + g + ',' + g + ',' + g + ')';
	}
	function drawBox(x, y, w, v, faded) {
		ctx.globalAlpha = faded ? 0.55 : 1;
		ctx.fillStyle = color(v);
		ctx.fillRect(x, y, Math.max(w - 0.5, 0.5), ROW - 1);
		if (v === hoverNode) {
			ctx.strokeStyle = '#000';
			ctx.strokeRect(x + 0.5, y + 0.5, Math.max(w - 1.5, 0.5), ROW - 2);
		}
		var fit = Math.floor((w - 6) / charW);
		if (fit >= 3) {
			var s = V.label[v];
			if (s.length > fit) s = s.slice(0, fit - 1) + '\u2026';
			ctx.fillStyle = '#000';
			ctx.fillText(s, x + 3, y + ROW - 5);
		}
		rows[V.depth[v]].push(x, w, v);
	}
	function render() {
		var width = canvas.parentNode.clientWidth - 24;
		if (width < 100) width = 100;
		var height = Math.min((maxDepth + 1) * ROW + 4, MAX_CANVAS);
		var ratio = window.devicePixelRatio || 1;
		canvas.width = Math.floor(width * ratio);
		canvas.height = Math.floor(height * ratio);
		canvas.style.height = height + 'px';
		ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
		ctx.clearRect(0, 0, width, height);
		ctx.font = '12px system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif';
		charW = ctx.measureText('abcdefghijklmnopqrstuvwxyz_ABCDEFGH').width / 34;
		rows = [];
		for (var d = 0; d <= maxDepth; d++) rows.push([]);
		/* Ancestors of the zoomed frame, full width and faded. */
		var chain = [];
		for (var a = zoom; a >= 0; a = V.parent[a]) chain.push(a);
		for (var k = chain.length - 1; k >= 1; k--) drawBox(0, V.depth[chain[k]] * ROW, width, chain[k], true);
		var scale = total[zoom] > 0 ? width / total[zoom] : 0;
		var stack = [zoom, 0];
		var maxRow = Math.floor(MAX_CANVAS / ROW) - 1;
		while (stack.length) {
			var x = stack.pop(), v = stack.pop();
			var w = total[v] * scale;
			if (V.depth[v] > maxRow) continue;
			drawBox(x, V.depth[v] * ROW, w, v, false);
			var cx = x;
			var list = [];
			for (var c = childStart[v]; c < childStart[v + 1]; c++) {
				var ch = children[c], cw = total[ch] * scale;
				if (cw >= MIN_PX) list.push(ch, cx);
				cx += cw;
			}
			for (var j = list.length - 2; j >= 0; j -= 2) stack.push(list[j], list[j + 1]);
		}
		ctx.globalAlpha = 1;
		updateText();
	}

	/* ---- search ---- */
	function search(text) {
		matchRe = null;
		matched = null;
		if (text) {
			try {
				matchRe = new RegExp(text, 'i');
			} catch (e) {
				matchRe = new RegExp(text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'), 'i');
			}
			matched = new Uint8Array(V.n);
			for (var v = 1; v < V.n; v++) if (matchRe.test(V.label[v])) matched[v] = 1;
		}
		render();
	}
	/* Cost of the samples with a matching frame on their stack, each counted
	 * once (a match under a match is already inside it). */
	function matchedCost() {
		if (!matched) return 0;
		var sum = 0, stack = [0];
		while (stack.length) {
			var v = stack.pop();
			if (matched[v]) {
				sum += total[v];
				continue;
			}
			for (var c = childStart[v]; c < childStart[v + 1]; c++) stack.push(children[c]);
		}
		return sum;
	}

	/* ---- text around the chart ---- */
	var elMatch = document.getElementById('match'), elSummary = document.getElementById('summary');
	var elCrumbs = document.getElementById('crumbs');
	function updateText() {
		var all = total[0];
		var nThreads = selectedThreads().length;
		elSummary.textContent = fmtCost(all) + ' in ' + nThreads + ' thread' + (nThreads === 1 ? '' : 's') +
			'. Click a frame to zoom, hover for details.';
		if (DIFF) {
			elSummary.textContent += ' Compared with BASE (' + DIFF.title + '): ' +
				Math.round(baseAll).toLocaleString('en-US') + ' ' + D.event + ' in ' + baseThreads.length +
				' thread' + (baseThreads.length === 1 ? '' : 's') + (baseAll ? ', of which ' +
				pct(baseUnmatched, baseAll) + ' in stacks not drawn here (gone in NEW)' : ': nothing matches') +
				'. Colour: change in self ' + diffBy + ', red more, blue less.';
		}
		if (matched) {
			var m = matchedCost();
			elMatch.textContent = 'Matched: ' + pct(m, all) + ' (' + fmtCost(m) + ')';
		} else {
			elMatch.textContent = '';
		}
		var chain = [];
		for (var a = zoom; a > 0; a = V.parent[a]) chain.push(V.label[a]);
		elCrumbs.textContent = zoom ? 'Zoomed: ' + chain.reverse().join(' \u25b8 ') + ' \u2014 ' +
			pct(total[zoom], all) + ' of the total' : '';
		document.getElementById('back').disabled = history.length === 0;
		document.getElementById('reset').disabled = zoom === 0;
	}

	/* ---- interaction ---- */
	function hit(ev) {
		var r = canvas.getBoundingClientRect();
		var x = ev.clientX - r.left, y = ev.clientY - r.top;
		var d = Math.floor(y / ROW);
		var row = rows[d];
		if (!row || y - d * ROW > ROW - 1) return -1;
		for (var k = 0; k < row.length; k += 3) if (x >= row[k] && x < row[k] + row[k + 1]) return row[k + 2];
		return -1;
	}
	function setZoom(v, remember) {
		if (v < 0 || v === zoom) return;
		if (remember) history.push(zoom);
		zoom = v;
		render();
	}
	var tip = document.getElementById('tip');
	function showTip(v, ev) {
		if (v < 0) {
			tip.hidden = true;
			return;
		}
		var html = '';
		var esc = function (s) {
			return String(s).replace(/[&<>"]/g, function (c) {
				return { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' }[c];
			});
		};
		if (v === 0) {
			html = '<b>all</b>\n' + esc(fmtCost(total[0]));
		} else {
			var f = D.funcs[V.func[v]];
			html = '<b>' + esc(f[0]) + '</b>\n';
			if (f[1]) html += esc(f[1]) + (V.line[v] > 0 ? ':' + V.line[v] : '') + '\n';
			else if (f[3]) html += esc(f[3]) + '\n';
			html += KINDS[f[2]] + ' frame\n' + esc(fmtCost(total[v])) + '\n' + pct(total[v], total[0]) + ' of the total';
			if (zoom) html += ', ' + pct(total[v], total[zoom]) + ' of the zoomed frame';
			if (DIFF) {
				var side = function (what, s, t, all, sc) {
					var amt = sc > 0 ? ' = ' + fmtAmount(s * sc) : '';
					return what + ': self ' + Math.round(s).toLocaleString('en-US') + ' (' + pct(s, all) + amt +
						'), total ' + Math.round(t).toLocaleString('en-US') + ' (' + pct(t, all) + ')\n';
				};
				html += '\n' + esc(side('new ', selfNew[v], total[v], total[0], DIFF.scale[1])) +
					esc(side('base', selfBase[v], totalBase[v], baseAll, DIFF.scale[0])) +
					'change: ' + esc(fmtChange(delta[v])) + ' of self' + (diffValue(selfBase[v], 0) > 0
					? ', x' + (diffValue(selfNew[v], 1) / diffValue(selfBase[v], 0)).toFixed(2) : selfNew[v] ? ', new' : '');
			}
		}
		tip.innerHTML = html;
		tip.hidden = false;
		var x = ev.clientX + 14, y = ev.clientY + 14;
		if (x + tip.offsetWidth > window.innerWidth - 4) x = Math.max(4, ev.clientX - tip.offsetWidth - 14);
		if (y + tip.offsetHeight > window.innerHeight - 4) y = Math.max(4, ev.clientY - tip.offsetHeight - 14);
		tip.style.left = x + 'px';
		tip.style.top = y + 'px';
	}
	canvas.addEventListener('mousemove', function (ev) {
		var v = hit(ev);
		if (v !== hoverNode) {
			hoverNode = v;
			render();
		}
		showTip(v, ev);
	});
	canvas.addEventListener('mouseleave', function () {
		hoverNode = -1;
		tip.hidden = true;
		render();
	});
	canvas.addEventListener('click', function (ev) {
		setZoom(hit(ev), true);
	});
	function back() {
		if (history.length) {
			zoom = history.pop();
			render();
		}
	}
	document.getElementById('back').addEventListener('click', back);
	document.getElementById('reset').addEventListener('click', function () {
		if (zoom) {
			history.push(zoom);
			zoom = 0;
			render();
		}
	});
	document.addEventListener('keydown', function (ev) {
		if (ev.key === 'Escape' && ev.target.id !== 'search') back();
	});
	var elSearch = document.getElementById('search'), searchTimer = 0;
	elSearch.addEventListener('input', function () {
		clearTimeout(searchTimer);
		searchTimer = setTimeout(function () { search(elSearch.value); }, 120);
	});
	elSearch.addEventListener('keydown', function (ev) {
		if (ev.key === 'Enter') {
			clearTimeout(searchTimer);
			search(elSearch.value);
		}
	});

	/* Thread / process selector: all, then each process, then each thread. */
	var elThread = document.getElementById('thread');
	function option(value, text) {
		var o = document.createElement('option');
		o.value = value;
		o.textContent = text;
		elThread.appendChild(o);
	}
	option('all', 'All threads (' + D.threads.length + ')');
	D.procs.forEach(function (p, i) {
		var n = D.threads.filter(function (t) { return t.proc === i; }).length;
		if (n && (D.procs.length > 1 || n > 1)) option('p' + i, 'Process ' + p[0] + ', ' + n + ' thread' + (n === 1 ? '' : 's'));
	});
	D.threads.forEach(function (t, i) {
		option('t' + i, 'Thread ' + t.name + (D.procs.length > 1 ? ' in ' + D.procs[t.proc][0] : ''));
	});
	/* Keeps the zoomed frame when it exists in the new selection. */
	function reselect() {
		computeTotals();
		if (!total[zoom]) zoom = 0;
		history = history.filter(function (v) { return total[v] > 0; });
		if (matchRe) search(elSearch.value);
		else render();
	}
	elThread.addEventListener('change', function () {
		sel = elThread.value;
		reselect();
	});
	document.getElementById('byfunc').addEventListener('change', function (ev) {
		byFunc = ev.target.checked;
		buildView();
		zoom = 0;
		history = [];
		matched = null;
		computeTotals();
		if (elSearch.value) search(elSearch.value);
		else render();
	});
	window.addEventListener('resize', render);
	var elDiffBy = document.getElementById('diffby');
	if (DIFF && elDiffBy) {
		elDiffBy.parentNode.hidden = false;
		elDiffBy.value = diffBy;
		if (!(DIFF.scale[0] > 0 && DIFF.scale[1] > 0)) elDiffBy.disabled = true;
		elDiffBy.addEventListener('change', function () {
			diffBy = elDiffBy.value;
			computeDiff();
			render();
		});
	}

	document.getElementById('title').textContent = D.title;
	document.title = 'strata: ' + D.title;
	buildView();
	computeTotals();
	render();

	window.strataFlame = {
		state: function () {
			return {
				selection: sel,
				zoom: zoom ? V.label[zoom] : null,
				zoomShare: total[0] ? total[zoom] / total[0] : 0,
				total: total[0],
				matched: matched ? matchedCost() : null,
				byFunc: byFunc,
				diff: DIFF ? { by: diffBy, baseTotal: baseAll, baseUnmatched: baseUnmatched,
					baseThreads: baseThreads.length } : null,
			};
		},
		/* --diff: both sides of the widest drawn box whose label contains text. */
		diff: function (text) {
			if (!DIFF) return null;
			var best = -1, bw = -1;
			rows.forEach(function (row) {
				for (var k = 0; k < row.length; k += 3)
					if (V.label[row[k + 2]].indexOf(text) >= 0 && row[k + 1] > bw) {
						bw = row[k + 1];
						best = row[k + 2];
					}
			});
			if (best < 0) return null;
			return { label: V.label[best], selfNew: selfNew[best], selfBase: selfBase[best], totalNew: total[best],
				totalBase: totalBase[best], delta: delta[best], color: color(best) };
		},
		/* The widest drawn box whose label contains text, in page coordinates. */
		find: function (text) {
			var best = null, r = canvas.getBoundingClientRect();
			rows.forEach(function (row, d) {
				for (var k = 0; k < row.length; k += 3) {
					var v = row[k + 2];
					if (V.label[v].indexOf(text) >= 0 && (!best || row[k + 1] > best.w))
						best = { x: r.left + window.scrollX + row[k], y: r.top + window.scrollY + d * ROW,
							w: row[k + 1], h: ROW - 1, label: V.label[v] };
				}
			});
			return best;
		},
		labels: function () {
			var out = [];
			rows.forEach(function (row) {
				for (var k = 0; k < row.length; k += 3) out.push(V.label[row[k + 2]]);
			});
			return out;
		},
	};
})();
