// Hands each chart's data (a json_script element) to plotly.js; the drawing is plotly's.
(function () {
  "use strict";
  var ink = "#1f2937", grid = "#e5e7eb";
  // Series colours, each with at least 4.5:1 contrast on white.
  var colours = ["#1d4ed8", "#b45309", "#047857"];
  document.querySelectorAll("[data-chart]").forEach(function (el) {
    var data = JSON.parse(document.getElementById(el.dataset.series).textContent);
    var line = el.dataset.chart === "line";
    var traces = data.series.map(function (series, index) {
      var colour = colours[index % colours.length];
      var trace = line
        ? { x: data.x, y: series.y, type: "scatter", mode: "lines+markers", line: { color: colour, width: 2 }, marker: { size: 4 } }
        : { x: data.x, y: series.y, type: "bar", marker: { color: colour } };
      trace.name = series.name;
      trace.hovertemplate = (data.series.length > 1 ? series.name + ", " : "") + "%{x}: %{y}<extra></extra>";
      return trace;
    });
    var yaxis = { title: { text: el.dataset.yTitle }, gridcolor: grid, rangemode: "tozero", fixedrange: true };
    if (el.dataset.yMax) { yaxis.range = [0, Number(el.dataset.yMax)]; }
    Plotly.newPlot(el, traces, {
      margin: { l: 48, r: 12, t: 8, b: 40 },
      height: 260,
      font: { family: "system-ui, sans-serif", size: 12, color: ink },
      paper_bgcolor: "rgba(0,0,0,0)",
      plot_bgcolor: "rgba(0,0,0,0)",
      xaxis: { gridcolor: grid, fixedrange: true, automargin: true },
      yaxis: yaxis,
      barmode: "group",
      showlegend: traces.length > 1,
      legend: { orientation: "h", y: -0.2 }
    }, { displayModeBar: false, responsive: true });
  });
})();
