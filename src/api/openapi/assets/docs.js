// Renders the API reference on /docs with Swagger UI (swagger-ui-bundle.js, served by us from the
// swagger-ui-dist package, is loaded before this file). The configuration comes from the data attributes
// of #api-reference: the server's content security policy blocks inline scripts, and nothing is loaded
// from outside this server (no validator badge, no fonts, no CDN).
(() => {
  const root = document.getElementById("api-reference");
  const SwaggerUIBundle = window.SwaggerUIBundle;
  if (!root || !SwaggerUIBundle) return;
  window.ui = SwaggerUIBundle({
    url: root.dataset.specUrl,
    domNode: root,
    presets: [SwaggerUIBundle.presets.apis],
    plugins: [SwaggerUIBundle.plugins.DownloadUrl],
    layout: "BaseLayout",
    deepLinking: true,
    displayOperationId: true,
    displayRequestDuration: true,
    docExpansion: "list",
    defaultModelsExpandDepth: 0,
    filter: true,
    showCommonExtensions: true,
    validatorUrl: null,
    queryConfigEnabled: false,
    persistAuthorization: false,
    tryItOutEnabled: false,
  });
})();
