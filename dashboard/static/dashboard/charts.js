// Hands each chart's data (a json_script element) to plotly.js; the drawing is plotly's.
(function () {
  "use strict";
  var ink = "#1f2937", grid = "#e5e7eb", accent = "#1d4ed8";
  document.querySelectorAll("[data-chart]").forEach(function (el) {
    var data = JSON.parse(document.getElementById(el.dataset.series).textContent);
    var line = el.dataset.chart === "line";
    var trace = line
      ? { x: data.x, y: data.y, type: "scatter", mode: "lines+markers", line: { color: accent, width: 2 }, marker: { size: 4 } }
      : { x: data.x, y: data.y, type: "bar", marker: { color: accent } };
    trace.name = el.dataset.yTitle;
    trace.hovertemplate = "%{x}: %{y}<extra></extra>";
    var yaxis = { title: { text: el.dataset.yTitle }, gridcolor: grid, rangemode: "tozero", fixedrange: true };
    if (el.dataset.yMax) { yaxis.range = [0, Number(el.dataset.yMax)]; }
    Plotly.newPlot(el, [trace], {
      margin: { l: 48, r: 12, t: 8, b: 40 },
      height: 260,
      font: { family: "system-ui, sans-serif", size: 12, color: ink },
      paper_bgcolor: "rgba(0,0,0,0)",
      plot_bgcolor: "rgba(0,0,0,0)",
      xaxis: { gridcolor: grid, fixedrange: true, automargin: true },
      yaxis: yaxis,
      showlegend: false
    }, { displayModeBar: false, responsive: true });
  });
})();
