// honestscale dashboard: live tables, figures with hover texts, zoomable run timelines.
// Served from the installed package; nothing is fetched from anywhere but this server.
"use strict";

// Tables that follow the store: the server renders the rows (escaped), this only swaps them in.
function followStore(body) {
  const url = body.dataset.refresh;
  async function refresh() {
    if (document.hidden) return;
    try {
      const response = await fetch(url, { credentials: "same-origin" });
      if (response.ok) body.innerHTML = await response.text();
    } catch (e) { /* the server restarts or the network is gone: try again next tick */ }
  }
  setInterval(refresh, 2000);
}

// A report figure drawn inline, so its points show their value, interval, runs and verdicts on hover.
async function inlineFigure(img) {
  try {
    const response = await fetch(img.src, { credentials: "same-origin" });
    if (!response.ok) return;
    const doc = new DOMParser().parseFromString(await response.text(), "image/svg+xml");
    const svg = doc.documentElement;
    if (svg.nodeName !== "svg") return;
    svg.querySelectorAll("script, foreignObject").forEach((el) => el.remove());
    svg.querySelectorAll("*").forEach((el) => {
      for (const attr of Array.from(el.attributes)) {
        if (attr.name.toLowerCase().startsWith("on")) el.removeAttribute(attr.name);
      }
    });
    svg.setAttribute("role", "img");
    svg.setAttribute("aria-label", img.alt);
    svg.classList.add("hs-inline");
    img.replaceWith(document.importNode(svg, true));
  } catch (e) { /* the picture stays an image: still right, only without hover texts */ }
}

// Zoom with the wheel around the pointer, pan by dragging, double-click to reset.
function zoomable(svg) {
  const box = svg.viewBox.baseVal;
  if (!box || !box.width) return;
  const home = [box.x, box.y, box.width, box.height];
  const set = (x, y, w, h) => svg.setAttribute("viewBox", `${x} ${y} ${w} ${h}`);
  const point = (event) => {
    const r = svg.getBoundingClientRect();
    const b = svg.viewBox.baseVal;
    return [b.x + (event.clientX - r.left) / r.width * b.width, b.y + (event.clientY - r.top) / r.height * b.height];
  };
  svg.addEventListener("wheel", (event) => {
    event.preventDefault();
    const b = svg.viewBox.baseVal;
    const [px, py] = point(event);
    const f = event.deltaY < 0 ? 0.8 : 1.25;
    const w = Math.min(home[2], b.width * f), h = Math.min(home[3], b.height * f);
    set(px - (px - b.x) * w / b.width, py - (py - b.y) * h / b.height, w, h);
  }, { passive: false });
  let drag = null;
  svg.addEventListener("pointerdown", (event) => { drag = point(event); svg.setPointerCapture(event.pointerId); });
  svg.addEventListener("pointermove", (event) => {
    if (!drag) return;
    const b = svg.viewBox.baseVal;
    const [px, py] = point(event);
    set(b.x - (px - drag[0]), b.y - (py - drag[1]), b.width, b.height);
  });
  svg.addEventListener("pointerup", () => { drag = null; });
  svg.addEventListener("dblclick", () => set(...home));
}

document.addEventListener("DOMContentLoaded", () => {
  document.querySelectorAll("[data-refresh]").forEach(followStore);
  document.querySelectorAll("img.hs-figure").forEach(inlineFigure);
  document.querySelectorAll(".zoomable svg").forEach(zoomable);
  const retry = document.getElementById("retry");
  if (retry) setTimeout(() => location.reload(), 1000 * Number(retry.dataset.retry || 3));
});
